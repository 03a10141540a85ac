/** The most calls one call of `many` is given; more wait for the next. */
const MOST_AT_ONCE = 256;

interface Call<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * A function of one input whose calls made in one turn of the event loop are made as one call of `many`, at
 * the turn's end (setImmediate; with `soon: 'tick'`, at the process.nextTick after the first call: the calls made
 * by the promises settled in the same callback go with it, if the first was made after an await too), with their
 * inputs in the order of the calls; each call gets its own output (`many` answers one per input, in order), or
 * the error of the call they shared. At most `parallel` calls of `many` run at once (default 1): what comes while
 * that many run waits, and goes in the next one with everything else that came meanwhile (at most MOST_AT_ONCE
 * inputs a call).
 *
 * The token requests of a turn are answered together (Turns, src/http/turns.ts), so the replay guard
 * records their proofs' ids this way: the stores in one transaction (store/kysely/assertion-jtis.ts), Redis in one
 * command (limits/replay.ts).
 */
export function perTurn<I, O>(
  many: (inputs: I[]) => Promise<O[]>,
  options: { parallel?: number; soon?: 'immediate' | 'tick' } = {},
): (input: I) => Promise<O> {
  const parallel = options.parallel ?? 1;
  const later = options.soon === 'tick' ? process.nextTick : setImmediate;
  let waiting: Call<I, O>[] = [];
  let scheduled = false;
  let running = 0;

  const runOne = (): void => {
    const calls = waiting.slice(0, MOST_AT_ONCE);
    waiting = waiting.slice(calls.length);
    running++;
    let answered: Promise<O[]>;
    try {
      answered = many(calls.map((call) => call.input));
    } catch (error) {
      answered = Promise.reject(error);
    }
    answered
      .then((outputs) => {
        if (outputs.length !== calls.length)
          throw new Error(`${outputs.length} answers to ${calls.length} calls`);
        calls.forEach((call, i) => call.resolve(outputs[i]!));
      })
      .catch((error: unknown) => {
        for (const call of calls) call.reject(error);
      })
      .finally(() => {
        running--;
        run();
      });
  };

  const run = (): void => {
    scheduled = false;
    while (running < parallel && waiting.length > 0) runOne();
  };

  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!scheduled && running < parallel) {
        scheduled = true;
        later(run);
      }
    });
}
