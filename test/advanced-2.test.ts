/** The advanced fixture matrix, second half (rows 1, 3, 5, ...; see test/matrix/advanced.ts). */
import { advancedMatrix } from './matrix/advanced.js';

advancedMatrix({ index: 1, of: 2 });
