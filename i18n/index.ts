/**
 * The learner's language and the message catalogs: every text a learner reads (step
 * titles, hints, verdicts, the menu, the command line's own messages) is a key in
 * i18n/en.ts, the source, with a counterpart in ko.ts and zh.ts written for each
 * language. `{name}` in a message is a placeholder filled by `t()`.
 */
import { en, type MessageKey } from './en.js';
import { ko } from './ko.js';
import { zh } from './zh.js';

export type { MessageKey } from './en.js';

/** The languages the lab is written in. */
export const LANGUAGES = ['en', 'ko', 'zh'] as const;

/** One of LANGUAGES. */
export type Lang = (typeof LANGUAGES)[number];

/** Every catalog by language; each has every key of the English one (the compiler checks). */
export const CATALOGS: Record<Lang, Record<MessageKey, string>> = { en, ko, zh };

let current: Lang = 'en';

/** Whether `value` names a language the lab is written in. */
export function isLang(value: unknown): value is Lang {
  return typeof value === 'string' && (LANGUAGES as readonly string[]).includes(value);
}

/** Chooses the language of every later `t()` call in this process. */
export function setLanguage(lang: Lang): void {
  current = lang;
}

/** The language `t()` speaks now (English until setLanguage is called). */
export function language(): Lang {
  return current;
}

/**
 * The language a locale name asks for: `ko_KR.UTF-8` → ko, `zh_CN.UTF-8` / `zh_TW` / `zh` → zh,
 * `en_US` → en; undefined for C, POSIX, empty, or a language the lab is not written in.
 */
export function langOfLocale(locale: string | undefined): Lang | undefined {
  const m = /^([a-z]{2,3})(?:[_-]|\.|@|$)/i.exec(locale ?? '');
  const code = m?.[1].toLowerCase();
  return isLang(code) ? code : undefined;
}

/**
 * The language the environment asks for, read as POSIX does: the first of LC_ALL,
 * LC_MESSAGES and LANG that is set and not empty decides; English when it names no
 * language of the lab (C, POSIX, fr_FR ...).
 */
export function languageFromEnv(env: NodeJS.ProcessEnv = process.env): Lang {
  const locale = [env.LC_ALL, env.LC_MESSAGES, env.LANG].find((v) => v !== undefined && v !== '');
  return langOfLocale(locale) ?? 'en';
}

/**
 * The language to use: `--lang` when given and known, else the workspace's setting, else
 * the environment's (languageFromEnv). An unknown `--lang` is reported in `unknown`.
 */
export function chooseLanguage(flag: string | undefined, workspaceLang: string | undefined, env: NodeJS.ProcessEnv = process.env): { lang: Lang; unknown?: string } {
  if (flag !== undefined) {
    const lang = isLang(flag) ? flag : langOfLocale(flag);
    if (lang) return { lang };
    return { lang: isLang(workspaceLang) ? workspaceLang : languageFromEnv(env), unknown: flag };
  }
  if (isLang(workspaceLang)) return { lang: workspaceLang };
  return { lang: languageFromEnv(env) };
}

/** The placeholders of a message: `{name}` → ['name'], sorted, each once. */
export function placeholders(message: string): string[] {
  return [...new Set([...message.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))].sort();
}

/**
 * A message in the current language with its placeholders filled. A placeholder without a
 * value stays as written, so a missing value shows instead of vanishing.
 * @param params values by placeholder name; numbers are written as they are
 */
export function t(key: MessageKey, params: Record<string, string | number> = {}): string {
  const message = CATALOGS[current][key] ?? en[key];
  return message.replace(/\{(\w+)\}/g, (whole, name: string) => (name in params ? String(params[name]) : whole));
}

/** Items of a list as the current language writes them: `10, 11, 12` in English and Korean, `10、11、12` in Chinese. */
export function listOf(items: ReadonlyArray<string | number>): string {
  return items.join(t('list.separator'));
}

/** The same message in a given language, whatever the current one. */
export function tIn(lang: Lang, key: MessageKey, params: Record<string, string | number> = {}): string {
  const saved = current;
  current = lang;
  try {
    return t(key, params);
  } finally {
    current = saved;
  }
}

/**
 * Where JSON.parse stopped, in the current language (`at line 1, column 2`), read from V8's
 * English message ("... in JSON at position 1 (line 1 column 2)"); V8's own text when it
 * names no place.
 */
export function jsonErrorWhere(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const at = /line (\d+) column (\d+)/.exec(message);
  if (at) return t('cli.config.jsonAt', { line: at[1], column: at[2] });
  const position = /position (\d+)/.exec(message);
  if (position) return t('cli.config.jsonPos', { position: position[1] });
  if (/Unexpected end of JSON input/.test(message)) return t('cli.config.jsonEnd');
  const token = /Unexpected token '(.+?)'/.exec(message) ?? /Unexpected non-whitespace character/.exec(message);
  if (token) return t('cli.config.jsonToken', { token: token[1] ?? '' });
  return message;
}
