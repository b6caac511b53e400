/**
 * The basic fixture matrix, first half (rows 0, 2, 4, ...; see test/matrix/basic.ts).
 * solutions-2.test.ts grades the other half, so that two rows are graded at once.
 */
import { basicMatrix } from './matrix/basic.js';

basicMatrix({ index: 0, of: 2 });
