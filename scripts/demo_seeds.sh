#!/usr/bin/env bash
# Runs `react-engine demo` under both protocols for seeds 1-10, at temperature 0 (the
# demo's default) and 0.7, and prints one line per run: exit code, wall seconds, answer.
# Exit code 0 means the answer carried the temperature get_weather returned.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for t in 0 0.7; do for p in function_calling text; do for s in 1 2 3 4 5 6 7 8 9 10; do
  start=$(date +%s.%N)
  out=$("$PY" -m react_engine demo --protocol "$p" --seed "$s" --temperature "$t" 2>&1); rc=$?
  end=$(date +%s.%N)
  printf 't=%s %s seed=%s rc=%s %.1fs %s\n' "$t" "$p" "$s" "$rc" "$(echo "$end - $start" | bc)" \
    "$(echo "$out" | grep -E '^   answer:' | head -1 | sed 's/^ *//')"
done; done; done
