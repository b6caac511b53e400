/** Step 13's messages (advanced track), in every language: en is the source. */
export const en = {
  'step.13.title': 'Store only what a replay needs',
  'step.13.hint.1': 'When the payment is done, the record needs two facts: the status, and which ledger row it made (its payment_id).',
  'step.13.hint.2': 'On a replay, read that row back from the ledger and build the answer from it, field by field, as the first response had it.',
  'step.13.hint.3': 'charged_at is the ledger row\'s created_at. Copying the whole response anywhere else, even encoded, keeps a second copy that can drift from the ledger.',
  'step.13.first.why': 'Without a first payment there is nothing to store.',
  'step.13.replay.why': 'A replay rebuilt from the ledger must be the first response exactly: the same payment_id, user, amount and charged_at.',
  'step.13.stored': 'Table {table}, column {column}, row {row} holds the first response\'s charged_at ({chargedAt}), {how}: only the ledger may hold it.',
  'step.13.stored.why': 'A record that keeps the whole response is a second copy of the payment. It grows with every response and can disagree with the ledger; the status and the payment\'s id are enough to rebuild the answer.',
  'step.13.how.plain': 'as it is',
  'step.13.how.encoded': 'once {how} is undone',
  'step.13.found': '{table}.{column}, row {row} ({bytes} bytes): {how}',
  'step.13.pass': 'Both replays, on A and on another server, equalled the first response; none of the {cells} values in {tables} tables besides the ledger holds its charged_at ({chargedAt}), in any common encoding.',
} as const;

/** 한국어. */
export const ko: Record<keyof typeof en, string> = {
  'step.13.title': '재생에 필요한 것만 저장하기',
  'step.13.hint.1': '결제가 끝나면 기록에는 두 가지만 있으면 됩니다. 상태, 그리고 어떤 원장 행을 만들었는지(payment_id)입니다.',
  'step.13.hint.2': '재생할 때는 그 행을 원장에서 다시 읽어, 첫 응답에 있던 필드를 하나씩 그 행으로 채웁니다.',
  'step.13.hint.3': 'charged_at은 원장 행의 created_at입니다. 응답 전체를 다른 곳에 복사하면, 인코딩을 해도, 원장과 어긋날 수 있는 두 번째 사본이 생깁니다.',
  'step.13.first.why': '첫 결제가 없으면 저장할 것도 없습니다.',
  'step.13.replay.why': '원장으로 다시 만든 재생은 첫 응답과 똑같아야 합니다. payment_id, user, amount, charged_at 모두 같아야 합니다.',
  'step.13.stored': '{table} 테이블의 {column} 열, {row}번째 행에 첫 응답의 charged_at({chargedAt})이 들어 있습니다({how}). 그 값은 원장에만 있어야 합니다.',
  'step.13.stored.why': '응답 전체를 담은 기록은 결제의 두 번째 사본입니다. 응답마다 커지고 원장과 어긋날 수 있습니다. 응답을 다시 만드는 데는 상태와 결제 id면 충분합니다.',
  'step.13.how.plain': '그대로',
  'step.13.how.encoded': '{how} 디코딩 후',
  'step.13.found': '{table}.{column}, {row}번째 행({bytes}바이트): {how}',
  'step.13.pass': 'A와 다른 서버에서 받은 재생 둘 다 첫 응답과 같았고, 원장 밖의 테이블 {tables}개에 있는 값 {cells}개 어디에도 charged_at({chargedAt})이 흔한 인코딩으로도 들어 있지 않았습니다.',
};

/** 中文。 */
export const zh: Record<keyof typeof en, string> = {
  'step.13.title': '只存重放需要的东西',
  'step.13.hint.1': '支付完成后，记录只需要两件事：状态，以及它生成了账本里的哪一行（payment_id）。',
  'step.13.hint.2': '重放时从账本读回那一行，按第一次响应的字段逐个用它填好。',
  'step.13.hint.3': 'charged_at 就是账本那一行的 created_at。把整个响应复制到别处，哪怕编码过，也会多出一份可能和账本对不上的副本。',
  'step.13.first.why': '没有第一笔支付，就没有东西可存。',
  'step.13.replay.why': '用账本重建的重放必须和第一次响应完全一样：payment_id、user、amount、charged_at 都相同。',
  'step.13.stored': '表 {table} 的 {column} 列第 {row} 行存着第一次响应的 charged_at（{chargedAt}，{how}）：它只应该在账本里。',
  'step.13.stored.why': '存下整个响应的记录是支付的第二份副本，每个响应都让它变大，还可能和账本不一致；重建响应只需要状态和支付的 id。',
  'step.13.how.plain': '原样',
  'step.13.how.encoded': '解开 {how} 之后',
  'step.13.found': '{table}.{column} 第 {row} 行（{bytes} 字节）：{how}',
  'step.13.pass': '在 A 和另一台服务器上的两次重放都等于第一次响应；账本之外 {tables} 张表里的 {cells} 个值，用常见编码解开后也都没有它的 charged_at（{chargedAt}）。',
};
