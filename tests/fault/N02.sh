# N02: an Inf gradient on rank 1 in step 3: as N01.
KIND=inf source "$(dirname "$0")/N01.sh" "$@"
