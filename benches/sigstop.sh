#!/bin/bash
# SIGSTOP of the daemon for STOP seconds while a writer appends; then SIGCONT and measure.
# SIGSTOP of the daemon for STOP seconds (default 60) while a writer appends half of a
# 6,000-line transcript; then SIGCONT: time until the checkpoint covers the file, /health,
# findings against check, duplicates.
set -u
STOP=${STOP:-60}
T=${T:-"$(dirname "$0")/../target/release/transcriptd"}
R=$(mktemp -d /tmp/ss.XXXX); mkdir -p $R/watch $R/state
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
python3 "$(dirname "$0")/../tests/gen/gen_transcripts.py" --lines 6000 --faults 0.02 --seed 6 -o $R/src.jsonl
$T run --config $R/t.toml >$R/stdout 2>$R/err &
P=$!
until grep -q 'addr=127' $R/err; do sleep 0.1; done
PORT=$(grep -o 'addr=[0-9.:]*' $R/err | head -1 | cut -d: -f2)
python3 - "$R" "$STOP" "$P" "$PORT" <<'PY'
import sys,time,os,signal,urllib.request,json
R,STOP,P,PORT=sys.argv[1],float(sys.argv[2]),int(sys.argv[3]),sys.argv[4]
def health():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health",timeout=2) as r: return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e: return e.code, e.read().decode().strip()
    except Exception as e: return None, repr(e)
src=open(f"{R}/src.jsonl","rb").read().splitlines(True)
out=open(f"{R}/watch/a.jsonl","ab")
half=len(src)//2
for l in src[:half]: out.write(l)
out.flush(); time.sleep(2)
print("health before stop", health(), flush=True)
os.kill(P, signal.SIGSTOP); t0=time.time(); print("stopped", time.strftime("%T"), flush=True)
# the writer goes on while the daemon is stopped
for l in src[half:]:
    out.write(l)
out.flush()
time.sleep(STOP)
os.kill(P, signal.SIGCONT); t1=time.time(); print(f"continued after {t1-t0:.0f}s", flush=True)
want=len(open(f"{R}/src.jsonl","rb").read())
# wait until the checkpoint covers the whole file
while True:
    try:
        cp=json.load(open(f"{R}/state/checkpoints.json"))
        if cp["files"] and cp["files"][0]["offset"]>=want-200: break
    except Exception: pass
    time.sleep(0.02)
print(f"caught up {time.time()-t1:.2f}s after SIGCONT; health {health()}", flush=True)
time.sleep(3)
print("health 3s later", health())
PY
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
PY
grep -i "warn\|error" $R/err | head -5
echo R=$R
