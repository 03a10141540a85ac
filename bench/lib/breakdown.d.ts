// Types of breakdown.js for the tests (the bench is JavaScript).
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
export function cpuBreakdown(
  profiles: { profile: CpuProfile; thread: 'main' | 'worker' }[],
  fromUs: number,
  toUs: number,
  cpu: { total: number; main: number; answers: number },
): Record<string, number> | undefined;
