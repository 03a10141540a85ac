import { readdirSync, readFileSync } from 'node:fs';

/** Linux /proc readings for tests that start and kill Tessera processes. */

export function procStat(pid: number): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]) };
  } catch {
    return undefined;
  }
}

/** A process that exists and is not a zombie. */
export function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

/** Live child processes of `pid`, sorted. */
export function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = Number(entry);
    const stat = procStat(child);
    if (stat?.ppid === pid && alive(child)) children.push(child);
  }
  return children.sort((a, b) => a - b);
}

/** Whether `pid` is a process started with this test's data directory (guards against a reused pid). */
export function startedWith(pid: number, dataDir: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`TESSERA_DATA_DIR=${dataDir}`);
  } catch {
    return false;
  }
}
