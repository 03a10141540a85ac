// Types of limits.js for the tests (the bench is JavaScript).
export interface Path {
  path: string;
  scenario?: string;
  peer?: string;
  signatures: number;
  verifications: ('es256Crypto' | 'es256Jose' | 'rs256Jose')[];
  replay: boolean;
  audited: boolean;
  also?: string[];
}
export interface Verifications {
  es256Crypto: number;
  es256Jose: number;
  rs256Jose: number;
  rs256Crypto?: number;
  replayRecord: number;
  replayBatch?: number;
}
export interface Costs {
  floorUs: number;
  signatureUs: number;
  auditUs: number | undefined;
  verifications: Verifications;
}
interface Row {
  scenario: string;
  connections: number;
  reqPerSec: number;
  serverCpuUsPerRequest: number;
}
export interface LimitRow {
  path: string;
  connections: number;
  limit: number;
  usPerAnswer: number;
  parts: [string, number][];
  missing: string[];
  tessera: number | undefined;
  tesseraUsPerAnswer: number | undefined;
  share: number | undefined;
  peer: number | undefined;
  peerShare: number | undefined;
  overPeer: number | undefined;
}
export const PATHS: Path[];
export function pathOf(scenario: string): Path;
export function referenceCosts(
  rows: Row[],
  connections: number,
  signature: { usPerSignature: number } | undefined,
  verifications: Verifications | undefined,
): Costs | undefined;
export function pathLimit(
  path: Path,
  costs: Costs,
): { parts: [string, number][]; usPerAnswer: number; reqPerSec: number; missing: string[] };
export function limitsTable(
  rows: Row[],
  concurrencies: number[],
  signature: { usPerSignature: number } | undefined,
  verifications: Verifications | undefined,
): LimitRow[];
export function limitParts(table: LimitRow[]): string[];
export function limitsText(table: LimitRow[]): string[];
export function limitsMarkdown(table: LimitRow[]): string[];
