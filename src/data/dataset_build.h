/* dataset_build.h - a source of records (JSONL or plain-text files, named by paths and globs) turned
 * into a tokenized dataset cache (data/dataset_cache.h) beside the data, streamed record by record
 * so that a dataset larger than memory works, and reused while the inputs, the tokenizer, the
 * template and the settings are unchanged (the cache's key is a hash of all of them). */
#ifndef ZT_DATASET_BUILD_H
#define ZT_DATASET_BUILD_H

#include "data/bpe.h"
#include "data/records.h"

#include <stdbool.h>
#include <stdio.h>

typedef enum zt_data_format { ZT_DATA_AUTO, ZT_DATA_TOKENS, ZT_DATA_JSONL, ZT_DATA_TEXT } zt_data_format;
typedef enum zt_text_unit { ZT_TEXT_LINE, ZT_TEXT_PARAGRAPH, ZT_TEXT_DOCUMENT } zt_text_unit;

typedef struct zt_dataset_spec {
    const char *source;      /* comma-separated paths and globs: one source's files, in that order */
    zt_data_format format;   /* JSONL, TEXT, or AUTO: by each file's extension (.jsonl, .json: JSONL) */
    zt_text_unit text_unit;  /* a plain-text record: a line (as `datasets`' text loader), a paragraph, a file */
    zt_record_rules rules;
    zt_bpe *tokenizer;
    int64_t eos_id;          /* appended to records that ask for it (zt_rendered.eos); -1: none */
    uint64_t settings_key;   /* the caller's hash of the tokenizer and template files and of anything
                                else that changes the tokens (folded into the cache key) */
    double val_fraction;     /* a record is in the validation split with this probability, decided by
                                a hash of (seed, its ordinal in the source) */
    uint64_t seed;
    const char *cache_dir;   /* "" or NULL: .zerotrain-cache beside the source's first file */
    FILE *progress;          /* progress lines (NULL: none) */
} zt_dataset_spec;

typedef struct zt_dataset_report {
    bool reused;
    uint64_t files, bytes, records, tokens, counted, val_records, empty;
    uint64_t searched; /* assistant turns found by their content: the template is not prefix-stable */
    double seconds;
} zt_dataset_report;

/* Builds (or finds) the cache of spec; its path into path[0..cap). Errors name the file and line
 * of the record at fault (FILE:LINE: malformed JSON at column C / the record's own error), a glob
 * that matches nothing, an unreadable file; the cache is then not written (atomic_file.h). */
int zt_dataset_build(const zt_dataset_spec *spec, char *path, size_t cap, zt_dataset_report *rep, zt_error *err);

/* The files of a source spec (paths and globs, comma-separated) in order, malloc'd (free each, then
 * the array). ZT_ERR_DATA naming a glob that matches nothing or a path that is not a file. */
int zt_dataset_files(const char *source, char ***files, int *n, zt_error *err);

#endif
