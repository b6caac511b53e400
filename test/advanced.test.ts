/**
 * The advanced fixture matrix, first half (rows 0, 2, 4, ...; see test/matrix/advanced.ts).
 * advanced-2.test.ts grades the other half, so that two rows are graded at once.
 */
import { advancedMatrix } from './matrix/advanced.js';

advancedMatrix({ index: 0, of: 2 });
