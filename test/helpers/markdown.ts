// Reading the project's markdown documents for the tests that keep them true: fenced code blocks,
// the `$ command` / output pairs of a ```console block, relative links and heading anchors.

export interface FencedBlock {
  /** The info string after the opening fence (`console`, `sh`, `yaml`, or '' for none). */
  lang: string;
  /** The block's lines, without the fences. */
  text: string;
  /** 1-based line of the opening fence. */
  line: number;
}

const FENCE = /^```(\S*)\s*$/;

/** Every fenced code block of a document, in order. Fences are top-level (not indented). */
export function fencedBlocks(md: string): FencedBlock[] {
  const lines = md.split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]); i++) body.push(lines[i]);
    if (i >= lines.length) throw new Error(`line ${start + 1}: a code block that is never closed`);
    blocks.push({ lang: open[1], text: body.join('\n'), line: start + 1 });
  }
  return blocks;
}

export interface ConsoleExample {
  /** 1-based line of the command in the document. */
  line: number;
  /** The command as a shell would read it: continuation lines and a here-document included. */
  command: string;
  /** What the document shows it printing, trailing blank lines removed. */
  output: string;
}

/**
 * The commands of a ```console block and what each prints: a command starts with `$ `, goes on
 * while its line ends with a backslash and, when it opens a here-document (`<<'EOF'`), up to the
 * terminator line; its output is every line up to the next `$ `.
 */
export function consoleExamples(block: FencedBlock): ConsoleExample[] {
  const lines = block.text.split('\n');
  if (!lines[0].startsWith('$ ')) throw new Error(`line ${block.line + 1}: a console block starts with a "$ " command`);
  const out: ConsoleExample[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = block.line + 1 + i;
    let command = lines[i++].slice(2);
    while (command.endsWith('\\') && i < lines.length) command += `\n${lines[i++]}`;
    const here = /<<-?\s*(['"]?)(\w+)\1/.exec(command);
    if (here) {
      while (i < lines.length && lines[i] !== here[2]) command += `\n${lines[i++]}`;
      if (i >= lines.length) throw new Error(`line ${line}: the here-document ${here[2]} never ends`);
      command += `\n${lines[i++]}`;
    }
    const output: string[] = [];
    while (i < lines.length && !lines[i].startsWith('$ ')) output.push(lines[i++]);
    while (output.length > 0 && output[output.length - 1] === '') output.pop();
    out.push({ line, command, output: output.join('\n') });
  }
  return out;
}

export interface Link {
  /** The link target as written, e.g. `docs/performance.md#method` or `#errors`. */
  target: string;
  line: number;
}

/** Inline links `[text](target)` outside code blocks and code spans, web and mail links left out. */
export function relativeLinks(md: string): Link[] {
  const links: Link[] = [];
  let inBlock = false;
  md.split('\n').forEach((text, i) => {
    if (/^```/.test(text)) inBlock = !inBlock;
    if (inBlock || /^```/.test(text)) return;
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (!/^[a-z][a-z0-9+.-]*:/i.test(m[1])) links.push({ target: m[1], line: i + 1 });
    }
  });
  return links;
}

/** The anchors GitHub gives a document's headings: lowercased, punctuation dropped, spaces as `-`, repeats numbered. */
export function headingAnchors(md: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inBlock = false;
  for (const text of md.split('\n')) {
    if (/^```/.test(text)) inBlock = !inBlock;
    const h = inBlock ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!h) continue;
    const base = h[1].replace(/`/g, '').toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}
