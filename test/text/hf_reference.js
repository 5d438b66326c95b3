// The reference side of the tokenizer parity tests: Hugging Face's
// tokenizers (its Rust library, through the npm binding) on the same inputs.
//
//   node hf_reference.js FIXTURES TOKENIZER_JSON < request.json > answer.json
//
// request: {"encode": [{"file": PATH, "add_special": BOOL}, ...],
//           "decode": [{"ids": [...], "skip_special": BOOL}, ...],
//           "bench": {"file": PATH, "repeat": N}}            (all optional)
// answer:  {"encode": [[ids...], ...], "decode": [TEXT, ...],
//           "bench": {"seconds": S, "tokens": T, "bytes": B}}
// Files are read as bytes and decoded as UTF-8 the way Node.js does
// (each invalid sequence becomes U+FFFD), which is what spark-tokenize does.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(process.argv[2], 'node_modules', 'tokenizers'));

(async () => {
  const tokenizer = Tokenizer.fromFile(process.argv[3]);
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const answer = { encode: [], decode: [] };
  for (const e of request.encode || []) {
    const text = fs.readFileSync(e.file).toString('utf8');
    const enc = await tokenizer.encode(text, null, { addSpecialTokens: !!e.add_special });
    answer.encode.push(Array.from(enc.getIds()));
  }
  for (const d of request.decode || [])
    answer.decode.push(await tokenizer.decode(d.ids, !!d.skip_special));
  if (request.bench) {
    const text = fs.readFileSync(request.bench.file).toString('utf8');
    await tokenizer.encode(text.slice(0, 1000), null, { addSpecialTokens: false });
    let tokens = 0;
    const start = process.hrtime.bigint();
    for (let i = 0; i < request.bench.repeat; i++)
      tokens += (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds().length;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    answer.bench = { seconds, tokens, bytes: Buffer.byteLength(text) * request.bench.repeat };
  }
  process.stdout.write(JSON.stringify(answer));
})().catch((e) => {
  process.stderr.write(`hf_reference.js: ${e.stack || e}\n`);
  process.exit(1);
});
