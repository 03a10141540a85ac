/** The most calls one call of `many` is given; more wait for the next. */
const MOST_AT_ONCE = 256;

interface Call<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * A function of one input whose calls made in one turn of the event loop are made as one call of `many`, at
 * the turn's end (setImmediate), with their inputs in the order of the calls; each call gets its own output
 * (`many` answers one per input, in order), or the error of the call they shared. One call of `many` runs at a
 * time: what comes while it runs waits for it, and goes in the next one, with everything else that came
 * meanwhile (at most MOST_AT_ONCE inputs a call).
 *
 * The SQLite store records the replay guard's ids this way (openSqliteStore): the token requests of a turn are
 * answered together (endOfTurn, src/http/routes/token.ts), each records its proof's id in that turn, and one
 * transaction records them all, with one commit and one wait for the write lock instead of one of each per
 * request.
 */
export function perTurn<I, O>(many: (inputs: I[]) => Promise<O[]>): (input: I) => Promise<O> {
  let waiting: Call<I, O>[] = [];
  let scheduled = false;
  let running = false;

  const run = (): void => {
    scheduled = false;
    if (running || waiting.length === 0) return;
    const calls = waiting.slice(0, MOST_AT_ONCE);
    waiting = waiting.slice(calls.length);
    running = true;
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
        running = false;
        run();
      });
  };

  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!scheduled && !running) {
        scheduled = true;
        setImmediate(run);
      }
    });
}
