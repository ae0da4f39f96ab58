#!/usr/bin/env node
// @ts-check
/**
 * Writes sql/schema.sql, the DDL of the store's table with the default names, from `schemaSql()`
 * of the build (dist/schema.js): the SQL a user can run in a migration is the store's own DDL,
 * kept in one place. Run by `build` after tsc; the file ships in the package (`files`), it is not
 * kept in git.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { schemaSql } from '../dist/schema.js';

const dir = new URL('../sql/', import.meta.url);
mkdirSync(dir, { recursive: true });
writeFileSync(new URL('schema.sql', dir), schemaSql());
