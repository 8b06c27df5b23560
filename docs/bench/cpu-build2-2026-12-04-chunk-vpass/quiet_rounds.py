# Medians of an ab.txt (scripts/bench_ab.sh) over the rounds whose own FMA ceiling is within 10 % of
# the highest seen: on the shared 2-vCPU build machine a neighbour holding a core halves a
# round's ceiling and doubles its times. usage: python3 quiet_rounds.py AB.TXT...
import sys, re, statistics as st
# per side: list of rounds; each round: ceiling + rows {key: (us, roof)}
sides = {'A': [], 'B': []}
cur = None
for path in sys.argv[1:]:
  for line in open(path):
    m = re.match(r'== (A|B) round', line)
    if m: cur = {'ceil': 0, 'rows': {}}; sides[m.group(1)].append(cur); continue
    if line.startswith('== medians'): cur = None; continue
    if cur is None: continue
    if line.startswith('FMA ceiling'): cur['ceil'] = float(line.split()[2]); continue
    f = line.split()
    if len(f) > 10 and f[0] in ('layer', 'step'):
        di = next(k for k in range(2, len(f)) if f[k].isdigit())
        key = (f[0], ' '.join(f[1:di]), f[di])
        bi = next(k for k in range(len(f)) if f[k] in ('fma', 'read'))
        cur['rows'][key] = (float(f[di + 1]), float(f[bi - 1]))
top = max(r['ceil'] for s in sides.values() for r in s)
keys = []
for s in sides.values():
  for r in s:
    for k in r['rows']:
      if k not in keys: keys.append(k)
print(f"rounds kept (ceiling >= 0.9 x {top}): A {sum(r['ceil'] >= 0.9*top for r in sides['A'])}/{len(sides['A'])}, B {sum(r['ceil'] >= 0.9*top for r in sides['B'])}/{len(sides['B'])}")
for k in keys:
  out = []
  for sd in 'AB':
    good = [r['rows'][k] for r in sides[sd] if r['ceil'] >= 0.9 * top and k in r['rows']]
    out.append((st.median([g[0] for g in good]) if good else float('nan'), st.median([g[1] for g in good]) if good else float('nan'), len(good)))
  print(f"{k[0]:5} {k[1]:18} {k[2]:>6}: A {out[0][0]:9.1f} us roof {out[0][1]:.3f} (n{out[0][2]})  B {out[1][0]:9.1f} us roof {out[1][1]:.3f} (n{out[1][2]})  B/A {out[1][0]/out[0][0]:.3f}")
