/**
 * One word per concept, per language: for each concept the word every Korean or Chinese
 * text uses (catalogs, hints, sheets), and the words it replaced. test/glossary.test.ts
 * fails when any text still uses a replaced word, outside the phrases listed as `allowed`
 * (where the same characters mean something else, e.g. a port 被占用 "taken", not a claim).
 * Checkers that read a learner's own words (steps/basic/words) accept synonyms on purpose
 * and are not held to this.
 */

/** A concept and its one word in a language. */
export interface GlossaryEntry {
  /** The concept, in English: the field's term (response, payment, claim, ...). */
  concept: string;
  /** The word every text uses for it. */
  use: string;
  /** Words that meant the same and must not be used for it any more. */
  replaced: string[];
  /** Phrases in which a replaced word means something else and stays. */
  allowed?: string[];
}

/** The Korean and Chinese glossaries (English keeps the field's terms: see the brief's names). */
export const GLOSSARY: Record<'ko' | 'zh', GlossaryEntry[]> = {
  ko: [
    { concept: 'track (basic, advanced)', use: '과정', replaced: ['트랙'] },
    { concept: 'ledger', use: '원장', replaced: ['장부'] },
    { concept: 'heading: what the check looks at', use: '**채점 기준.**', replaced: ['**검사 방법.**', '**검사가 보는 것.**', '**채점 내용.**'] },
    { concept: 'heading: why', use: '**왜 필요한가.**', replaced: ['**왜 그런가.**'] },
    { concept: 'replay (answering a used key with the stored response)', use: '재생', replaced: ['재전송'] },
    { concept: 'payment provider (charge())', use: '결제사', replaced: ['대행사'] },
    { concept: 'round (of a check)', use: '라운드', replaced: ['회차'] },
    { concept: 'lock (database, key)', use: '잠금', replaced: ['락'], allowed: ['누락'] },
    { concept: 'the lab sheet (LAB.md, ADVANCED.md)', use: '안내서', replaced: ['실습지'] },
    { concept: 'workspace', use: '작업 폴더', replaced: ['작업 공간', '작업공간'] },
    { concept: 'replayed (an answer given again)', use: '재생되었습니다', replaced: ['다시 응답되었습니다'] },
    { concept: 'the three ideas of step 08', use: '세 가지 핵심', replaced: ['세 가지 생각', '세 가지 아이디어'] },
    { concept: 'a payment charged more than once (chaos, as its "중복" row says)', use: '두 번 이상 청구된', replaced: ['두 번 이상 결제된'] },
    { concept: 'crash (a server killed mid-request, step 12, as the menu says; 충돌 is the conflict of step 04)', use: '비정상 종료', replaced: ['충돌 뒤', '충돌로 남은', '충돌하면'] },
    { concept: 'ledger row (a row of the ledger table, as ./ledger.sh prints it; 줄 stays a line of output or of a file)', use: '원장 행', replaced: ['원장 줄', '원장 {rows}줄', '원장에 한 줄', '원장에 줄', '원장은 한 줄', '원장 한 줄', '{count}줄이 있지만'] },
    {
      concept: "charge (the provider moving money: charge(), the statement, chaos; the shop's payment, a ledger row, stays 결제)",
      use: '청구',
      replaced: ['결제사가 실제로 결제한', '결제사는 결제한', '결제 {charges}번', '번 결제했지만', '번 결제했는데', '결제사가 결제했', '언제 결제했는지', '결제사 키로 써서 결제', '결제도 원장 행도', '결제는 있고 원장 행은', '결제는 그대로 하나'],
    },
    { concept: 'claim (on a key, while in flight)', use: '선점', replaced: ['점유'] },
  ],
  zh: [
    { concept: 'response', use: '响应', replaced: ['应答', '回应'] },
    { concept: 'payment', use: '支付', replaced: ['付款'] },
    { concept: 'charge (the provider moving money)', use: '扣款', replaced: [] },
    { concept: 'payment provider (charge())', use: '支付服务商', replaced: ['支付商', '服务商'], allowed: ['支付服务商'] },
    { concept: 'track (basic, advanced)', use: '路线', replaced: ['轨道'] },
    { concept: 'claim (on a key, while in flight)', use: '占位', replaced: ['占用'], allowed: ['被占用', '程序占用', '占用 {file}'] },
    { concept: 'request body', use: '请求体', replaced: ['正文'] },
    { concept: 'workspace', use: '工作目录', replaced: ['工作区'] },
    { concept: 'a note that does not fail the step (hint is the hint feature)', use: '注意：', replaced: ['提示：'] },
    { concept: 'heading: what the check looks at', use: '**检查内容。**', replaced: ['**怎么检查。**', '**检查方式。**', '**检查看什么。**', '**评分内容。**'] },
  ],
};

/**
 * The replaced words `text` uses, by the glossary of `lang`: each with the word to use instead.
 * @returns one finding per replaced word found (outside its allowed phrases), in glossary order
 */
export function replacedWords(text: string, lang: 'ko' | 'zh'): Array<{ word: string; use: string }> {
  const found: Array<{ word: string; use: string }> = [];
  for (const entry of GLOSSARY[lang]) {
    let rest = text;
    for (const phrase of entry.allowed ?? []) rest = rest.split(phrase).join('');
    for (const word of entry.replaced) if (rest.includes(word)) found.push({ word, use: entry.use });
  }
  return found;
}
