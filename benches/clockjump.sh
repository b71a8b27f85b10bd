#!/bin/bash
# Clock jump: the daemon under libfaketime, its clock moved +/- while a writer appends.
# The daemon under libfaketime (apt: faketime) while a writer appends 3,000 lines: its wall
# clock jumps +1 h at a third and -2 h at two thirds (MONO=0 fakes CLOCK_MONOTONIC too, which
# no real clock step does). Prints findings against check, duplicates, health, warnings.
set -u
T=${T:-"$(dirname "$0")/../target/release/transcriptd"}
R=$(mktemp -d /tmp/cj.XXXX); mkdir -p $R/watch $R/state
cat > $R/t.toml <<EOT
[daemon]
state_dir = "$R/state"
checkpoint_interval = "100ms"
poll_interval = "500ms"
[[sources]]
include = ["$R/watch/**/*.jsonl"]
[[stages]]
type = "parse"
[[stages]]
type = "orphans"
grace = "2s"
[[stages]]
type = "validate"
[[sinks]]
type = "file"
path = "$R/out.jsonl"
[[sinks]]
type = "prometheus"
address = "127.0.0.1:0"
EOT
echo "+0" > $R/ft
python3 "$(dirname "$0")/../tests/gen/gen_transcripts.py" --lines 3000 --faults 0.02 --seed 5 -o $R/src.jsonl
FAKETIME_DONT_FAKE_MONOTONIC=${MONO:-1} LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 FAKETIME_TIMESTAMP_FILE=$R/ft FAKETIME_NO_CACHE=1 \
  $T run --config $R/t.toml >$R/stdout 2>$R/err &
P=$!
sleep 2
python3 - "$R" <<'PY'
import sys,time,os
R=sys.argv[1]
src=open(f"{R}/src.jsonl","rb").read().splitlines(True)
n=len(src); out=open(f"{R}/watch/a.jsonl","ab")
steps=[(0.33,"+3600s"),(0.66,"-7200s")]
for i,l in enumerate(src):
    out.write(l); out.flush()
    for frac,off in steps:
        if i==int(n*frac):
            open(f"{R}/ft","w").write(off+"\n"); print("jump",off,"at line",i,time.strftime("%T"),flush=True)
    time.sleep(0.002)
PY
sleep 5
PORT=$(grep -o 'addr=[0-9.:]*' $R/err | head -1 | cut -d: -f2)
curl -s -w " %{http_code}" 127.0.0.1:$PORT/health; echo
kill $P; wait $P; echo "exit $?"
$T check --output json --no-summary $R/watch | python3 -c "import sys,json; print('check findings', sum(1 for l in sys.stdin if json.loads(l).get('kind')))"
python3 - "$R" <<'PY'
import sys,json,collections
R=sys.argv[1]
live=collections.Counter()
for l in open(f"{R}/out.jsonl"):
    r=json.loads(l)
    k=(r.get('file'),r.get('line'),r.get('kind'),r.get('call_id'))
    if r['type']=='finding': live[k]+=1
    elif r['type']=='finding_retracted': live[k]-=1
print('daemon live findings', sum(1 for v in live.values() if v>0), 'dups', sum(1 for v in live.values() if v>1))
times=[json.loads(l)['time'] for l in open(f"{R}/out.jsonl") if '"time"' in l]
print('record times first/last', times[0], times[-1])
PY
grep -i "warn\|error" $R/err | head -5
echo R=$R
