import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Linux /proc readings for tests that start and kill Tessera processes. */

function procStat(pid: number): { state: string; ppid: number } | undefined {
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

/** An established IPv4 TCP socket as /proc/net/tcp lists it: each side of a connection is a socket of its own. */
interface TcpSocket {
  localPort: number;
  remotePort: number;
  /** Bytes sent and not yet taken by the other side, and bytes received and not yet read by the process. */
  sendQueue: number;
  receiveQueue: number;
  inode: string;
}

function establishedSockets(): TcpSocket[] {
  const port = (address: string) => parseInt(address.slice(address.lastIndexOf(':') + 1), 16);
  const sockets: TcpSocket[] = [];
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10 || fields[3] !== '01') continue;
    const [send, receive] = fields[4]!.split(':');
    sockets.push({
      localPort: port(fields[1]!),
      remotePort: port(fields[2]!),
      sendQueue: parseInt(send!, 16),
      receiveQueue: parseInt(receive!, 16),
      inode: fields[9]!,
    });
  }
  return sockets;
}

/** What `pid`'s open file descriptors point at (`socket:[inode]` for a socket); throws if it has none to read. */
function descriptorsOf(pid: number): string[] {
  const targets: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      targets.push(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      // closed meanwhile
    }
  }
  return targets;
}

/** Which of `pids` holds the server side of the connection from `clientPort` to `serverPort`. */
export function connectionOwner(serverPort: number, clientPort: number, pids: number[]): number | undefined {
  const socket = establishedSockets().find((s) => s.localPort === serverPort && s.remotePort === clientPort);
  if (socket === undefined) return undefined;
  for (const pid of pids) {
    let held: string[];
    try {
      held = descriptorsOf(pid);
    } catch {
      continue;
    }
    if (held.includes(`socket:[${socket.inode}]`)) return pid;
  }
  return undefined;
}

/** How many established connections to `serverPort` `pid` holds the server side of. */
export function connectionsHeldBy(pid: number, serverPort: number): number {
  const inodes = new Set(
    establishedSockets()
      .filter((s) => s.localPort === serverPort)
      .map((s) => `socket:[${s.inode}]`),
  );
  return descriptorsOf(pid).filter((target) => inodes.has(target)).length;
}

/**
 * Whether what was sent on the connections from `clientPorts` to `serverPort` has been read by the server:
 * nothing waits in the client's send queue nor in the server's receive queue.
 */
export function allRead(serverPort: number, clientPorts: readonly number[]): boolean {
  const ports = new Set(clientPorts);
  const sockets = establishedSockets();
  const sent = sockets.filter((s) => s.remotePort === serverPort && ports.has(s.localPort));
  const received = sockets.filter((s) => s.localPort === serverPort && ports.has(s.remotePort));
  return (
    sent.length === ports.size &&
    received.length === ports.size &&
    [...sent, ...received].every((s) => s.sendQueue === 0 && s.receiveQueue === 0)
  );
}
