# sourced by every device call: packages, models (fp16 carried -> fp32), environment
R=$(pwd); D=$R/.devrun
mkdir -p $D/site $D/logs
[ -d $D/site/bm25s ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $D/site $D/whl/*.whl
[ -f $D/minilm/model.safetensors ] || python3 $D/bin/fp32.py $D/minilm/model.safetensors $D/minilm/model.fp16.safetensors
M=$D/cache/models/all-mpnet-base-v2
if [ ! -f $M/model.safetensors ] && [ -f $D/mp4/chunk ]; then
  python3 $D/bin/fp32.py $M/model.safetensors $D/mp1/chunk $D/mp2/chunk $D/mp3/chunk $D/mp4/chunk
fi
export PYTHONPATH=$R/src:$D/shim:$D/site SBERT_DATA=$D/data SBERT_CACHE=$D/cache PYTHONUNBUFFERED=1 OMP_NUM_THREADS=5 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True XLA_PYTHON_CLIENT_PREALLOCATE=false TOKENIZERS_PARALLELISM=false
mkdir -p benchmarks/.work/adapt benchmarks/.work/batches
cp -rn $D/seed/adapt/. benchmarks/.work/adapt/ 2>/dev/null || true
