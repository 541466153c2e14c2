# bash .devrun/bin/chains.sh LIMIT_SECONDS "BATCHES ARGS" "OO METHODS" "SCIFACT METHODS" "ADAPT EXTRA ARGS" "STATIC ARGS"
set -u
source .devrun/bin/setup.sh
L=.devrun/logs; LIMIT=$1; END=$((SECONDS+LIMIT))
nvidia-smi --query-gpu=name,memory.total --format=csv > $L/gpu.log 2>&1
python3 -c "import torch,transformers,sentence_transformers,sbert,bm25s;print(torch.__version__,transformers.__version__,sentence_transformers.__version__,torch.cuda.is_available())" > $L/versions.log 2>&1
cat $L/versions.log $L/gpu.log
( while true; do bash .devrun/bin/pack.sh; sleep 15; done ) & PK=$!
chain() {  # collection, methods, extra
  for m in $2; do
    left=$((END-SECONDS)); [ $left -gt 25 ] || { echo "$1 $m: no time left" >> $L/skipped.log; break; }
    echo "$(date +%T) $1 $m start" >> $L/chain.log
    for try in 1 2; do
      left=$((END-SECONDS)); [ $left -gt 25 ] || break
      timeout $left python3 -m benchmarks.adapt --device ${DEV:-cuda} --collections $1 --methods $m --steps 100 ${3:-} > $L/adapt-$1-$m-$try.log 2>&1
      rc=$?; echo "$(date +%T) $1 $m try $try rc=$rc" >> $L/chain.log
      [ $rc = 0 ] && break; sleep 3
    done
  done
}
P=""
if [ -n "$2" ]; then ( timeout $LIMIT python3 -m benchmarks.batches --device ${DEV:-cuda} $2 > $L/batches-$(date +%H%M%S).log 2>&1; echo "$(date +%T) batches rc=$?" >> $L/chain.log ) & P="$P $!"; fi
if [ -n "$3" ]; then chain openoffice-dups "$3" "${5:-}" & P="$P $!"; fi
if [ -n "$4" ]; then chain scifact "$4" "${5:-}" & P="$P $!"; fi
if [ -n "${6:-}" ]; then ( timeout $LIMIT python3 -m benchmarks.static --device ${DEV:-cuda} $6 > $L/static-$(date +%H%M%S).log 2>&1; echo "$(date +%T) static rc=$?" >> $L/chain.log ) & P="$P $!"; fi
wait $P
kill $PK 2>/dev/null; bash .devrun/bin/pack.sh
cat $L/chain.log; tail -n 3 $L/*.log | tail -n 60
