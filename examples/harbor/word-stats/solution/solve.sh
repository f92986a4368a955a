#!/bin/bash
set -euo pipefail
cd /app
cat data/*.txt | tr 'A-Z' 'a-z' | grep -oE '[a-z]+' | sort | uniq -c \
  | awk '{print $2 "\t" $1}' | sort -t "$(printf '\t')" -k2,2nr -k1,1 > out/counts.tsv
files=$(ls data/*.txt | wc -l)
words=$(awk -F '\t' '{s += $2} END {print s}' out/counts.tsv)
top=$(head -1 out/counts.tsv | cut -f1)
printf '{"files": %d, "words": %d, "top": "%s"}\n' "$files" "$words" "$top" > out/summary.json
