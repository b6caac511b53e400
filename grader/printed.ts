/**
 * What servers print, kept line by line in the order the grader received the lines from
 * all of them, so that the output of several servers started by one check reads as one
 * transcript: every line labelled with the server that printed it (`[A] …`), in print order.
 */

/** One line a server printed, and its place among every line any server printed (1, 2, …). */
export interface PrintedLine {
  /** The order in which the grader received the line's first character, across all servers of this process. */
  seq: number;
  /** The line without its newline (a last line still being printed has none yet). */
  text: string;
}

/** The counter behind PrintedLine.seq: one for the whole process, so lines of different servers compare. */
let printedSoFar = 0;

/**
 * The last lines one server printed on its streams (stdout and stderr), each with its
 * PrintedLine.seq; at most `maxChars` characters of whole lines are kept (the oldest go
 * first). A stream's unfinished line is kept apart, so stdout and stderr never share a line.
 */
export class PrintedTail {
  private readonly kept: PrintedLine[] = [];
  private chars = 0;
  private readonly partial = new Map<object, PrintedLine>();

  /** @param maxChars how many characters of lines to keep (at least the last line is kept, itself cut to its last maxChars characters) */
  constructor(private readonly maxChars: number) {}

  /** Adds what `stream` delivered (a UTF-8 decoded chunk, any length, possibly ending mid-line). */
  add(stream: object, chunk: string): void {
    const pieces = chunk.split('\n');
    let open = this.partial.get(stream);
    for (let i = 0; i < pieces.length; i++) {
      if (open) open.text += pieces[i];
      else if (pieces[i] !== '' || i < pieces.length - 1) open = { seq: ++printedSoFar, text: pieces[i] };
      // A line is kept to its last maxChars characters: a server printing without end and
      // without a newline never makes the grader hold more than that.
      if (open && open.text.length > this.maxChars) open.text = open.text.slice(-this.maxChars);
      if (i < pieces.length - 1 && open) {
        this.kept.push(open);
        this.chars += open.text.length + 1;
        open = undefined;
      }
    }
    if (open) this.partial.set(stream, open);
    else this.partial.delete(stream);
    while (this.kept.length > 1 && this.chars > this.maxChars) this.chars -= (this.kept.shift() as PrintedLine).text.length + 1;
  }

  /** The lines kept, unfinished ones included, in print order. */
  lines(): PrintedLine[] {
    return [...this.kept, ...this.partial.values()].sort((a, b) => a.seq - b.seq);
  }
}

/** A label the grader gives a server instance: A, B, C, … (capital letters and digits). */
const LABELLED_LINE = /^\[([A-Z][A-Z0-9]*)\](?: (.*))?$/;

/**
 * The output of several servers as one text: every line `[label] text` (`[label]` alone for
 * an empty line), all servers' lines in the order they were printed; a server that printed
 * only blank lines is left out. Empty when none printed anything.
 * @param servers each with its label (e.g. `A`) and its lines (PrintedTail.lines)
 */
export function labelledOutput(servers: ReadonlyArray<{ label: string; printed(): PrintedLine[] }>): string {
  return servers
    .filter((s) => s.printed().some((line) => line.text.trim() !== ''))
    .flatMap((s) => s.printed().map((line) => ({ ...line, label: s.label })))
    .sort((a, b) => a.seq - b.seq)
    .map((line) => (line.text === '' ? `[${line.label}]` : `[${line.label}] ${line.text}`))
    .join('\n');
}

/**
 * One line of a labelledOutput text split into the server's label and what it printed; a
 * line without a label (output that was never labelled) has the label ''.
 */
export function splitLabel(line: string): { label: string; text: string } {
  const m = LABELLED_LINE.exec(line);
  return m ? { label: m[1], text: m[2] ?? '' } : { label: '', text: line };
}
