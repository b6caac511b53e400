/** The basic fixture matrix, second half (rows 1, 3, 5, ...; see test/matrix/basic.ts). */
import { basicMatrix } from './matrix/basic.js';

basicMatrix({ index: 1, of: 2 });
