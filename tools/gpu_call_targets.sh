# shellcheck shell=bash
# gpu_call_targets.sh — sourced, not run: the binaries one device call needs (the GPU tests'
# and the tools'), in one place for tools/gpu_call.sh (what its check builds) and
# tools/gpu_prebuild.sh (what it packs), so that a pack always holds every target of the call;
# and the variants whose bench keeps its per-op and per-layer breakdown by default, for
# gpu_call.sh and the host's launch audit (tests/test_gpu_scripts.sh --launch-audit), so that
# the audit runs each variant exactly as the call does.
# shellcheck disable=SC2034 # used by the scripts that source this file
SG_GPU_CALL_TARGETS="test_cuda_ops test_cuda_step test_hopper_gpu test_sampler test_backend_ops \
test_torch_parity verify train bench sample plan ckpt"
SG_GPU_CALL_BREAKDOWN='^(tuned|tuned_unfused|auto_fused|wgmma_unfused_halo)$'
