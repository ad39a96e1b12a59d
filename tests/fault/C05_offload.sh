# C05 (offload): an I/O error in the NVMe offload files during a step (ZeRO-Infinity: zero3 with the
# parameters and the optimizer state in files, memory.offload_param/optimizer nvme): rank 1's I/O
# thread gets EIO on a block in step 5 (a read or a write of the pieces or the moments). Both ranks
# stop with exit 8, the file and the error named; the last commit (step 4) validates and the run
# resumes from it, offloaded, -> NL (offload is bit-identical to the in-memory run R: tests/offload.sh).
# Then ENOSPC on a write of the offload files in step 3: exit 8 likewise, the commit of step 2 intact.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
mkdir -p "$T/nvme" "$T/nvmeB"
OFF=(--set memory.offload_param=nvme --set memory.offload_optimizer=nvme
     --set memory.offload_param_nvme_path="$T/nvme" --set memory.offload_optimizer_nvme_path="$T/nvme")
ZT_FAULT=eio:at=offload:rank=1:step=5:n=1 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 "${OFF[@]}"
expect_rc 8 "EIO in an offload file in step 5" A
grep -q "error (io).*$T/nvme.*Input/output error" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1 | cut -c1-230)" ||
  bad "A: message: $(grep -i error "$T/A.err" | head -3)"
[ "$(last_commit "$T/ck")" = 4 ] && ok "A: latest is step 4" || bad "A: $(ls "$T/ck")"
nl_check A "$T/ck" "${OFF[@]}"
ZT_FAULT=enospc:at=offload:rank=0:step=3 run_job B --ckpt-dir "$T/ckB" --ckpt-every 2 "${OFF[@]}" --set memory.offload_param_nvme_path="$T/nvmeB" --set memory.offload_optimizer_nvme_path="$T/nvmeB"
expect_rc 8 "ENOSPC writing an offload file in step 3" B
grep -q "error (io).*$T/nvmeB.*No space left on device" "$T/B.err" && ok "$(grep -o 'error (io).*' "$T/B.err" | head -1 | cut -c1-230)" ||
  bad "B: message: $(grep -i error "$T/B.err" | head -3)"
[ "$(last_commit "$T/ckB")" = 2 ] && "$Z" verify "$T/ckB/step-00000002" > /dev/null 2>&1 && ok "B: step 2's commit intact" || bad "B: $(ls "$T/ckB")"
finish
