"""The text the tiny test tokenizers are trained on (tests/conftest.py), importable by test modules."""

CORPUS = [
    "Vitamin D deficiency is linked to bone loss in older adults.",
    "The stock market fell sharply after the announcement.",
    "Retrieve semantically similar text. Given a scientific claim, retrieve documents.",
    "Cats and dogs are popular pets; many people keep both at home.",
    "Proteins fold into three-dimensional structures that determine their function!",
    "user assistant system question answer claim evidence support refute query passage",
    "0 1 2 3 4 5 6 7 8 9 the of and to in is was for on with as by at from",
] * 4
