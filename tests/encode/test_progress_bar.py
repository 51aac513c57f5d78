"""The encode progress bar: its percentage and ETA follow the characters embedded (the longest texts go first, so a
count of texts would run slow early and project far too long a run), while it counts texts; the encoder's pass
ahead of the decoder moves it too."""

from __future__ import annotations

import random

import c2v_rag.encode.loop as loop


def test_the_encode_bar_moves_by_characters_and_counts_texts(tiny_model_factory, monkeypatch, capsys):
    rng = random.Random(0)
    words = "tide moon sea shore wave current salt storm".split()
    # A few long texts among many short ones: by count the long ones are a sliver, by characters most of it.
    texts = [" ".join(rng.choices(words, k=rng.choice([3, 4, 120]))) for _ in range(40)]
    model = tiny_model_factory()
    read: list[int] = []  # the rows of each encoder forward
    model.encoder.register_forward_hook(lambda _m, _a, kw, _o: read.append(kw["input_ids"].shape[0]), with_kwargs=True)
    shown: list[tuple[int, float, int]] = []  # (texts done, the bar's fraction, texts the encoder read) per update

    class Recording(loop.CountingBar):
        def update(self, n=1):
            result = super().update(n)
            shown.append((self.count, self.n / self.total, sum(read)))
            return result

    monkeypatch.setattr(loop, "CountingBar", Recording)
    model.encode(texts, batch_size=4, show_progress_bar=True)
    # independent of the bar: the share of the characters in the k longest texts, the order the batches run in; the
    # encoder's pass ahead of the decoder credits ENCODER_WORK_SHARE of those it has read, the decoder the rest
    longest_first = sorted((len(t) for t in texts), reverse=True)
    total, share = sum(longest_first), loop.ENCODER_WORK_SHARE
    for done, fraction, encoded in shown:
        expected = share * sum(longest_first[:encoded]) + (1 - share) * sum(longest_first[:done])
        assert abs(fraction - expected / total) <= 1 / total, (done, encoded, fraction)
    assert any(done == 0 and fraction > 0 for done, fraction, _ in shown)  # the encoder's pass moves the bar
    recorded = [(done, fraction) for done, fraction, _ in shown]
    assert recorded[-1] == (40, 1.0) and len(recorded) >= 10
    long_texts = sum(length > 200 for length in longest_first)
    # once the long texts are done, most of the bar is (by count it would be a fraction of it)
    done, fraction = next((done, fraction) for done, fraction in recorded if done >= long_texts)
    assert 0 < long_texts < 20 and fraction > 0.6 > done / 40 + 0.2
    screens = [s for s in capsys.readouterr().err.replace("\r", "\n").splitlines() if s.startswith("Encoding")]
    assert "100%" in screens[-1] and "40/40 texts" in screens[-1] and "texts/s" in screens[-1]
