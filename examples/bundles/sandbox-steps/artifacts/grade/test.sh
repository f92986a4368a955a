#!/bin/bash
# Harbor-style: always exits 0; the reward file says how it went.
mkdir -p /logs/verifier
if [ -f /app/report/count.txt ] && [ "$(cat /app/report/count.txt)" = "4" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
