/** The `expect` the shared suites take (Vitest's and Jest's both fit). */
export interface ExpectMatchers {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toBeUndefined(): void;
  toBeDefined(): void;
  toBeGreaterThan(expected: number): void;
  toBeGreaterThanOrEqual(expected: number): void;
  toBeLessThan(expected: number): void;
  toBeLessThanOrEqual(expected: number): void;
  toContain(expected: unknown): void;
  toMatchObject(expected: object): void;
}

/** The `expect` the suite needs: Vitest's and Jest's both fit. */
export type ExpectLike = (actual: unknown) => ExpectMatchers;
