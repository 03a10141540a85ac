import { expect } from 'vitest';

/** The error a promise rejected with; fails the test if it resolved or rejected with something not a `type`. */
export async function rejection<E extends Error = Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E = Error as unknown as abstract new (...args: never[]) => E,
): Promise<E> {
  let thrown: unknown;
  try {
    await promise;
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(type);
  return thrown as E;
}

/** The error a function threw; fails the test if it returned or threw something not a `type`. */
export function thrownBy<E extends Error>(fn: () => unknown, type: abstract new (...args: never[]) => E): E {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(type);
  return thrown as E;
}
