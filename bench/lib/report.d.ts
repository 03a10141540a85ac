// Types of report.js for the tests (the bench is JavaScript): the parts they call.
interface MeasuredRow {
  scenario: string;
  label: string;
  connections: number;
  reqPerSec: number;
}
export function medianRows<R extends MeasuredRow>(rows: R[]): (R & { rounds?: number[] })[];
