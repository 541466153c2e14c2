# the rows (small JSON) and logs -> $OUT/results.tgz
cd $(dirname $0)/../..
{ find benchmarks/results/records benchmarks/.work/adapt -maxdepth 2 -name '*.json'
  ls benchmarks/.work/static/*.json benchmarks/.work/static/models/*.json benchmarks/.work/static/models/*.train/log.jsonl
  ls .devrun/logs/*.log benchmarks/results/*.md; } > /tmp/list 2>/dev/null
tar czf $OUT/results.tgz.tmp -T /tmp/list 2>/dev/null; mv $OUT/results.tgz.tmp $OUT/results.tgz
