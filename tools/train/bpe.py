"""Byte-level BPE: training, encoding, and writing Hugging Face tokenizer files.

The tokenizer is the GPT-2 family's: text is split on the added (special) tokens,
each remaining piece is split by the GPT-2 pre-tokenizer pattern, every piece's
UTF-8 bytes are mapped to printable characters (the byte-level alphabet), and
merges are applied by rank. `write_tokenizer_json` writes exactly that as a
`tokenizer.json` (model BPE, pre-tokenizer and decoder ByteLevel), so Hugging
Face's implementation encodes the same ids as `Tokenizer.encode` here.
"""

import heapq
import json

import regex

# Hugging Face's ByteLevel pre-tokenizer pattern (use_regex = true).
SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_SPLIT = regex.compile(SPLIT_PATTERN)


def byte_alphabet():
    """Byte value -> printable character, the byte-level BPE convention:
    printable Latin-1 bytes map to themselves, the rest to U+0100 onwards."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
            + list(range(ord("\xae"), ord("\xff") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_ALPHABET = byte_alphabet()


def _pieces(text):
    return [("".join(_ALPHABET[b] for b in m.encode("utf-8"))) for m in _SPLIT.findall(text)]


def _split_special(text, specials):
    """Splits text into (is_special, piece) around occurrences of special tokens."""
    if not specials:
        return [(False, text)]
    pattern = regex.compile("(" + "|".join(regex.escape(s) for s in
                                           sorted(specials, key=len, reverse=True)) + ")")
    out = []
    for i, part in enumerate(pattern.split(text)):
        if part:
            out.append((i % 2 == 1, part))
    return out


def train(texts, vocab_size, specials, progress=None):
    """Learns merges so that 256 bytes + merges + specials == vocab_size.
    Ties between equally frequent pairs go to the lexicographically smallest
    pair, so training is deterministic."""
    n_merges = vocab_size - 256 - len(specials)
    counts = {}
    for text in texts:
        for is_special, part in _split_special(text, specials):
            if is_special:
                continue
            for piece in _pieces(part):
                counts[piece] = counts.get(piece, 0) + 1
    words = [list(w) for w in counts]
    freqs = list(counts.values())
    pair_count, pair_where = {}, {}
    for wi, symbols in enumerate(words):
        for a, b in zip(symbols, symbols[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + freqs[wi]
            pair_where.setdefault((a, b), set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg <= 0:
            continue
        merges.append(pair)
        merged = pair[0] + pair[1]
        changed = set()
        for wi in list(pair_where.get(pair, ())):
            symbols = words[wi]
            f = freqs[wi]
            for a, b in zip(symbols, symbols[1:]):
                pair_count[(a, b)] -= f
                changed.add((a, b))
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[wi] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] = pair_count.get((a, b), 0) + f
                pair_where.setdefault((a, b), set()).add(wi)
                changed.add((a, b))
        pair_count.pop(pair, None)
        pair_where.pop(pair, None)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
        if progress and len(merges) % 500 == 0:
            progress(len(merges), n_merges)
    if len(merges) < n_merges:
        raise SystemExit(f"BPE training: the text allows only {len(merges)} merges, "
                         f"{n_merges} are needed for vocab_size {vocab_size}")
    return merges


class Tokenizer:
    def __init__(self, merges, specials):
        self.merges = merges
        self.specials = list(specials)
        self.vocab = {}
        for b in range(256):
            self.vocab[_ALPHABET[b]] = b
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        for s in specials:
            self.vocab[s] = len(self.vocab)
        self.ranks = {p: i for i, p in enumerate(merges)}
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.byte_of = {c: b for b, c in _ALPHABET.items()}
        self._cache = {}

    def _bpe(self, piece):
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        symbols = list(piece)
        while len(symbols) > 1:
            best, best_rank = None, None
            for i in range(len(symbols) - 1):
                r = self.ranks.get((symbols[i], symbols[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
        ids = [self.vocab[s] for s in symbols]
        self._cache[piece] = ids
        return ids

    def encode(self, text):
        ids = []
        for is_special, part in _split_special(text, self.specials):
            if is_special:
                ids.append(self.vocab[part])
            else:
                for piece in _pieces(part):
                    ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            tok = self.id_to_token[i]
            if tok in self.specials:
                out += tok.encode("utf-8")
            else:
                out += bytes(self.byte_of[c] for c in tok)
        return out.decode("utf-8", errors="replace")


def write_tokenizer_json(path, tok, special_flags):
    """special_flags: {token: True if it is a control token (skipped when decoding
    with skip_special_tokens)}."""
    added = []
    for s in tok.specials:
        added.append({"id": tok.vocab[s], "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": special_flags[s]})
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": {t: i for t, i in tok.vocab.items() if t not in tok.specials},
            "merges": [f"{a} {b}" for a, b in tok.merges],
        },
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=None)
        f.write("\n")
