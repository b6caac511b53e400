/**
 * The advanced track's end-of-track lines (`summary.NN`: what a step proved) and the words
 * beside its reference answer (`answer.NN`, shown by `idem-lab solution`), steps 10 on, in
 * every language: en is the source. Step 09 keeps its own in 09-replayed.ts.
 */
export const en = {
  'summary.10': "keys belong to a user: another user's key is their own payment, never someone else's receipt",
  'summary.11': 'records expire after IDEM_TTL_S and are deleted; an expired key is refused with 410, never charged again',
  'summary.12': 'a server killed mid-payment leaves no key stuck in flight, and the retry pays once: the provider takes the key too',
  'summary.13': "a record keeps the status and the payment's id; the replay is rebuilt from the ledger, unchanged",
  'summary.14': 'a replay tells what happened then, and links to the payment as it is now',
  'summary.15': 'clients without a key are deduplicated by their body, for a short window only',
  'answer.10': "Make the record's key the user and the client's key together, in a form two pairs can never share (a JSON list), and pass that to the provider too.",
  'answer.11': 'Refuse a record older than TTL_S with 410, delete old records as new payments come in, and recognise an expired key by its ledger row once its record is gone.',
  'answer.12': 'Take over a claim older than LOCK_S with a compare-and-set on its time, charge with the record key as the provider key, and finish the claim only while it is still yours.',
  'answer.13': 'Store {"payment_id": N} as the response and rebuild the replay from that ledger row.',
  'answer.14': 'Add Location: payment_link(id) to the first 201 and to every replay; the replay stays the first answer.',
  'answer.15': 'Without a key, derive the record key from the user and the fingerprint, and start a new window once its record is older than KEYLESS_WINDOW_S.',
} as const;

/** 한국어. */
export const ko: Record<keyof typeof en, string> = {
  'summary.10': '키는 사용자의 것이다: 다른 사용자가 같은 키를 보내면 그 사람의 결제가 되고, 남의 영수증은 절대 받지 않는다',
  'summary.11': '기록은 IDEM_TTL_S가 지나면 만료되어 지워지고, 만료된 키는 410으로 거절되며 다시 결제되지 않는다',
  'summary.12': '결제 도중 죽은 서버도 처리 중인 채로 멈춘 키를 남기지 않고, 재시도는 한 번만 결제한다: 결제사도 키를 받는다',
  'summary.13': '기록에는 상태와 결제 id만 두고, 재생은 원장에서 다시 만들어도 그대로다',
  'summary.14': '재생은 그때 일어난 일을 말하고, 지금의 결제 상태로 가는 링크를 단다',
  'summary.15': '키 없는 클라이언트는 본문으로, 짧은 시간 창 안에서만 중복 제거한다',
  'answer.10': '기록의 키를 사용자와 클라이언트 키를 합친 값으로 하되, 서로 다른 두 쌍이 절대 같아지지 않는 형태(JSON 목록)로 만들고, 결제사에도 그 값을 넘깁니다.',
  'answer.11': 'TTL_S보다 오래된 기록은 410으로 거절하고, 새 결제가 들어올 때 오래된 기록을 지우며, 기록이 사라진 뒤에는 원장의 행으로 만료된 키를 알아봅니다.',
  'answer.12': 'LOCK_S보다 오래된 선점은 그 시각을 비교해 바꾸는 방식으로 넘겨받고, 기록 키를 결제사 키로 써서 청구하며, 선점이 아직 내 것일 때만 마무리합니다.',
  'answer.13': '응답 자리에는 {"payment_id": N}만 저장하고, 재생은 그 원장 행에서 다시 만듭니다.',
  'answer.14': '첫 201과 모든 재생에 Location: payment_link(id)를 붙입니다. 재생 내용은 첫 응답 그대로 둡니다.',
  'answer.15': '키가 없으면 사용자와 지문으로 기록 키를 만들고, 그 기록이 KEYLESS_WINDOW_S보다 오래되면 새 창을 엽니다.',
};

/** 中文。 */
export const zh: Record<keyof typeof en, string> = {
  'summary.10': '键属于某个用户：别的用户发来同一个键是他自己的支付，绝不会拿到别人的收据',
  'summary.11': '记录在 IDEM_TTL_S 之后过期并被删除；过期的键以 410 拒绝，绝不再次扣款',
  'summary.12': '支付途中被杀死的服务器不会让键永远卡在处理中，重试只扣一次：支付服务商也收到键',
  'summary.13': '记录只保存状态和支付 id；重放从账本重新构建，内容不变',
  'summary.14': '重放说明当时发生了什么，并链接到支付现在的状态',
  'summary.15': '没有键的客户端按请求体去重，而且只在很短的时间窗口内',
  'answer.10': '把记录的键设为用户和客户端键的组合，用两组不同的值绝不会相同的形式（JSON 列表），并把它也交给支付服务商。',
  'answer.11': '比 TTL_S 更旧的记录用 410 拒绝，有新支付时删除旧记录，记录删除之后靠账本里的行认出过期的键。',
  'answer.12': '比 LOCK_S 更旧的占位，用比较并交换它的时间来接手；扣款时把记录的键当作支付服务商的键；只有占位仍归自己时才完成它。',
  'answer.13': '响应的位置只存 {"payment_id": N}，重放从那一行账本重新构建。',
  'answer.14': '给第一次的 201 和每次重放都加上 Location: payment_link(id)；重放的内容保持第一次的响应。',
  'answer.15': '没有键时，用用户和指纹生成记录的键；记录比 KEYLESS_WINDOW_S 更旧时，开始一个新窗口。',
};
