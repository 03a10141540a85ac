/**
 * The report of an import (docs/import.md): one line for each thing mapped, left out or changed, with its place in
 * the source and why. A line never holds a secret.
 */
import { pointerSegment } from '../../domain/json-depth.js';
import type { Place, SourceDoc } from './source.js';

export type Outcome = 'mapped' | 'left_out' | 'changed';

/** One line of the report, as every face shows it (the CLI: `<place>: <outcome>: <detail>`). */
export interface ReportLine {
  place: string;
  outcome: Outcome;
  detail: string;
}

/** The place of a value below another: `below(client, 'attributes', 'jwks.url')`. */
export const below = (at: Place, ...path: (string | number)[]): Place => ({
  doc: at.doc,
  pointer: at.pointer + path.map((s) => `/${pointerSegment(s)}`).join(''),
});

/** The place of a document's root. */
export const rootOf = (doc: SourceDoc): Place => ({ doc, pointer: '' });

/**
 * The most lines a report holds (some five for each client of the largest export read, 64 MiB): past it, lines are
 * counted, not kept, and a last line says how many were left unsaid, so that no export makes a report that
 * exhausts memory, whatever it repeats.
 */
export const MAX_REPORT_LINES = 200_000;

/** The most characters of all its lines' details: lines that each name many scopes are bounded too. */
const MAX_REPORT_CHARS = 64 * 1024 * 1024;

export class Report {
  private readonly entries: { at: Place; outcome: Outcome; detail: string }[] = [];
  private unsaid = 0;
  private chars = 0;

  private add(at: Place, outcome: Outcome, detail: string): void {
    // Once one is left unsaid, every later one is too: what is unsaid is the report's end.
    if (
      this.unsaid === 0 &&
      this.entries.length < MAX_REPORT_LINES &&
      this.chars + detail.length <= MAX_REPORT_CHARS
    ) {
      this.entries.push({ at, outcome, detail });
      this.chars += detail.length;
    } else this.unsaid++;
  }

  mapped(at: Place, detail: string): void {
    this.add(at, 'mapped', detail);
  }

  leftOut(at: Place, detail: string): void {
    this.add(at, 'left_out', detail);
  }

  changed(at: Place, detail: string): void {
    this.add(at, 'changed', detail);
  }

  /** Its lines, each place as its source writes places; the last says how many more were left unsaid, if any. */
  lines(): ReportLine[] {
    const lines: ReportLine[] = this.entries.map((e) => ({
      place: e.at.doc.place(e.at.pointer),
      outcome: e.outcome,
      detail: e.detail,
    }));
    if (this.unsaid > 0)
      lines.push({
        place: this.entries[0]!.at.doc.place(''),
        outcome: 'left_out',
        detail: `${this.unsaid} more ${this.unsaid === 1 ? 'line' : 'lines'} of this report, left unsaid: a report holds at most ${MAX_REPORT_LINES} lines, of ${MAX_REPORT_CHARS} characters in all`,
      });
    return lines;
  }
}

/** A report line as the CLI prints it. */
export const reportLineText = (line: ReportLine): string => `${line.place}: ${line.outcome}: ${line.detail}`;
