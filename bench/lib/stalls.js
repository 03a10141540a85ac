/**
 * `--stalls`: the longest callbacks a server's event loop ran (bench/servers/stalls.js logs them) and, from its
 * CPU profile, the code that ran in each: the samples inside the callback's window, by their innermost frame of
 * Tessera's own (dist/), or their innermost frame where none is Tessera's. A sample that spans time off the CPU
 * (the thread preempted) is counted where it was taken.
 */
import { readFileSync } from 'node:fs';

/** The file's text, or nothing if there is none (a server that logged no stall). */
function textOf(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * The `count` longest stalls of `stallsFile` that began at `from` (µs) or later, each with the frames that
 * took most of its samples.
 */
export function namedStalls(profile, stallsFile, from, count = 8) {
  const stalls = textOf(stallsFile)
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, ms, type] = line.split(' ');
      return { start: Number(start), ms: Number(ms), type };
    })
    .filter((stall) => stall.start >= from)
    .sort((a, b) => b.ms - a.ms)
    .slice(0, count);
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const frameOf = (id) => {
    const leaf = byId.get(id)?.callFrame;
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at).callFrame;
      const dist = frame.url.includes('/node_modules/') ? null : /\/dist\/(.*)$/.exec(frame.url);
      if (dist) return `${frame.functionName || '(anonymous)'} dist/${dist[1]}:${frame.lineNumber + 1}`;
    }
    return leaf ? `${leaf.functionName || '(native)'} ${leaf.url.replace(/^.*\/node_modules\//, '')}` : '?';
  };
  const times = [];
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) times.push((t += profile.timeDeltas[i] ?? 0));
  return stalls.map((stall) => {
    const end = stall.start + stall.ms * 1000;
    const frames = new Map();
    for (let i = 0; i < times.length; i++) {
      if (times[i] < stall.start || times[i] > end) continue;
      const name = frameOf(profile.samples[i]);
      frames.set(name, (frames.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
    }
    const top = [...frames].sort((a, b) => b[1] - a[1]).slice(0, 3);
    return {
      ms: stall.ms,
      atSeconds: (stall.start - profile.startTime) / 1e6,
      type: stall.type,
      frames: top.map(([name, ms]) => ({ name, ms })),
    };
  });
}

/** The stalls of one profile as text lines. */
export function stallsText(scenario, stalls) {
  const lines = [
    `Event-loop stalls of ${scenario} once it was ready (the longest callbacks, and what ran in them):`,
  ];
  if (stalls.length === 0) lines.push('  none at or over the threshold');
  for (const s of stalls)
    lines.push(
      `  ${s.ms.toFixed(1).padStart(6)} ms at ${s.atSeconds.toFixed(2)} s (${s.type}): ` +
        (s.frames.map((f) => `${f.ms.toFixed(1)} ms ${f.name}`).join('; ') || 'no samples'),
    );
  return lines;
}
