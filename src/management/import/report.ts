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

export class Report {
  private readonly entries: { at: Place; outcome: Outcome; detail: string }[] = [];

  mapped(at: Place, detail: string): void {
    this.entries.push({ at, outcome: 'mapped', detail });
  }

  leftOut(at: Place, detail: string): void {
    this.entries.push({ at, outcome: 'left_out', detail });
  }

  changed(at: Place, detail: string): void {
    this.entries.push({ at, outcome: 'changed', detail });
  }

  /** Its lines, each place as its source writes places. */
  lines(): ReportLine[] {
    return this.entries.map((e) => ({
      place: e.at.doc.place(e.at.pointer),
      outcome: e.outcome,
      detail: e.detail,
    }));
  }
}

/** A report line as the CLI prints it. */
export const reportLineText = (line: ReportLine): string => `${line.place}: ${line.outcome}: ${line.detail}`;
