// Types of scenarios.js for the tests (the bench is JavaScript): the parts they call.
export function medianOfEach<T extends Record<string, number>>(runs: T[]): T | undefined;
