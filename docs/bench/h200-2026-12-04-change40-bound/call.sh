set -u
mkdir -p /tmp/b4; xz -dc .carry/c46/ladder_B.xz >/tmp/b4/ladder_B; xz -dc .carry/c47/ladder_C.xz >/tmp/b4/ladder_C; chmod +x /tmp/b4/*
mkdir -p $OUT/ab
OUT=$OUT/ab timeout 200 scripts/bench_ab.sh /tmp/b4/ladder_B /tmp/b4/ladder_C 2 --depths 2048,32768 --routes splitk/ring --batch 2,4,8 --step-depths none --batch-max-depth 0 >/dev/null 2>&1
echo "ab rc=$?" >$OUT/rc.txt
