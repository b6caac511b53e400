/** Step 13's messages (advanced track), in every language: en is the source. */
export const en = {
  'step.13.title': 'Store only what a replay needs',
  'step.13.hint.1': 'When the payment is done, the record needs two facts: the status, and which ledger row it made (its payment_id).',
  'step.13.hint.2': 'On a replay, read that row back from the ledger and build the answer from it, field by field, as the first response had it.',
  'step.13.hint.3': 'charged_at is the ledger row\'s created_at. Copying the whole response anywhere else, even encoded, keeps a second copy that can drift from the ledger.',
  'step.13.first.why': 'Without a first payment there is nothing to store.',
  'step.13.replay.why': 'A replay rebuilt from the ledger must be the first response exactly: the same payment_id, user, amount and charged_at.',
  'step.13.stored': '{where} holds the first response\'s charged_at ({chargedAt}), {how}: only the ledger may hold it.',
  'step.13.inTable': 'Table {table}, column {column}, row {row}',
  'step.13.inFile': 'The file {file} beside the database',
  'step.13.keylessFirst': 'With IDEM_KEYLESS_WINDOW_S set, a payment without an Idempotency-Key must be made: 201.',
  'step.13.stored.why': 'A record that keeps the whole response is a second copy of the payment. It grows with every response and can disagree with the ledger; the status and the payment\'s id are enough to rebuild the answer.',
  'step.13.how.plain': 'as it is',
  'step.13.how.julian': 'as a julian day',
  'step.13.how.encoded': 'once {how} is undone',
  'step.13.found': '{table}.{column}, row {row} ({bytes} bytes): {how}',
  'step.13.pass': 'Both replays of a payment with a key and of one without, on A and on another server, equalled the first responses; none of the {cells} values in {tables} tables besides the ledger\'s own columns, and none of the {files} files the servers wrote beside the database, holds their charged_at ({chargedAt}) other than as a record\'s own time, in any common encoding.',
} as const;

/** 한국어. */
export const ko: Record<keyof typeof en, string> = {
  'step.13.title': '재생에 필요한 것만 저장하기',
  'step.13.hint.1': '결제가 끝나면 기록에는 두 가지만 있으면 됩니다. 상태, 그리고 어떤 원장 행을 만들었는지(payment_id)입니다.',
  'step.13.hint.2': '재생할 때는 그 행을 원장에서 다시 읽어, 첫 응답에 있던 필드를 하나씩 그 행으로 채웁니다.',
  'step.13.hint.3': 'charged_at은 원장 행의 created_at입니다. 응답 전체를 다른 곳에 복사하면, 인코딩을 해도, 원장과 어긋날 수 있는 두 번째 사본이 생깁니다.',
  'step.13.first.why': '첫 결제가 없으면 저장할 것도 없습니다.',
  'step.13.replay.why': '원장으로 다시 만든 재생은 첫 응답과 똑같아야 합니다. payment_id, user, amount, charged_at 모두 같아야 합니다.',
  'step.13.stored': '{where}에 첫 응답의 charged_at({chargedAt})이 들어 있습니다({how}). 그 값은 원장에만 있어야 합니다.',
  'step.13.inTable': '{table} 테이블의 {column} 열, {row}번째 행',
  'step.13.inFile': '데이터베이스 옆의 파일 {file}',
  'step.13.keylessFirst': 'IDEM_KEYLESS_WINDOW_S가 설정되어 있으면 Idempotency-Key 없는 결제도 이루어져야 합니다: 201.',
  'step.13.stored.why': '응답 전체를 담은 기록은 결제의 두 번째 사본입니다. 응답마다 커지고 원장과 어긋날 수 있습니다. 응답을 다시 만드는 데는 상태와 결제 id면 충분합니다.',
  'step.13.how.plain': '그대로',
  'step.13.how.julian': '율리우스일로',
  'step.13.how.encoded': '{how} 디코딩 후',
  'step.13.found': '{table}.{column}, {row}번째 행({bytes}바이트): {how}',
  'step.13.pass': '키가 있는 결제와 없는 결제의 재생이 A와 다른 서버 모두에서 첫 응답과 같았고, 원장 자체의 열을 뺀 테이블 {tables}개의 값 {cells}개와 서버가 데이터베이스 옆에 쓴 파일 {files}개 어디에도, 기록 자신의 시각으로서가 아니라면, charged_at({chargedAt})이 흔한 인코딩으로도 들어 있지 않았습니다.',
};

/** 中文。 */
export const zh: Record<keyof typeof en, string> = {
  'step.13.title': '只存重放需要的东西',
  'step.13.hint.1': '支付完成后，记录只需要两件事：状态，以及它生成了账本里的哪一行（payment_id）。',
  'step.13.hint.2': '重放时从账本读回那一行，按第一次响应的字段逐个用它填好。',
  'step.13.hint.3': 'charged_at 就是账本那一行的 created_at。把整个响应复制到别处，哪怕编码过，也会多出一份可能和账本对不上的副本。',
  'step.13.first.why': '没有第一笔支付，就没有东西可存。',
  'step.13.replay.why': '用账本重建的重放必须和第一次响应完全一样：payment_id、user、amount、charged_at 都相同。',
  'step.13.stored': '{where}存着第一次响应的 charged_at（{chargedAt}，{how}）：它只应该在账本里。',
  'step.13.inTable': '表 {table} 的 {column} 列第 {row} 行',
  'step.13.inFile': '数据库旁边的文件 {file}',
  'step.13.keylessFirst': '设置了 IDEM_KEYLESS_WINDOW_S 时，没有 Idempotency-Key 的支付也必须完成：201。',
  'step.13.stored.why': '存下整个响应的记录是支付的第二份副本，每个响应都让它变大，还可能和账本不一致；重建响应只需要状态和支付的 id。',
  'step.13.how.plain': '原样',
  'step.13.how.julian': '以儒略日形式',
  'step.13.how.encoded': '解开 {how} 之后',
  'step.13.found': '{table}.{column} 第 {row} 行（{bytes} 字节）：{how}',
  'step.13.pass': '带键和不带键的支付，在 A 和另一台服务器上的重放都等于第一次响应；除账本自己的列之外，{tables} 张表里的 {cells} 个值和服务器在数据库旁边写的 {files} 个文件，用常见编码解开后也都没有它们的 charged_at（{chargedAt}），除非那是记录自己的时间。',
};
