# Sourced by run.sh and ab.sh. REQUIRE_GPU=NAME (part of the GPU's name,
# e.g. H200) stops the script, exit 3, on any other GPU, before it builds or
# runs anything: a call meant for one card costs little device time when
# the device tool lends another.
if [ -n "${REQUIRE_GPU:-}" ]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
    head -1 || true)
  case "$gpu_name" in
  *"$REQUIRE_GPU"*) ;;
  *)
    echo "REQUIRE_GPU=$REQUIRE_GPU: the GPU is '${gpu_name:-none found}';" \
      "nothing run" >&2
    exit 3
    ;;
  esac
fi
