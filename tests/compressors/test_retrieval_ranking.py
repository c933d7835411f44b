from __future__ import annotations

import bm25s
import numpy as np
import numpy.typing as npt
import pytest

from compressors.retrieval.ranking import (
    PHRASE_OCCURRENCES,
    LexicalIndex,
    _occurrences,
    complete,
    cosine_scores,
    fuse,
    order_by_score,
    phrase_scores,
)
from compressors.retrieval.tokenize import terms
from tests.fixtures.haystack import ProseGenerator

TEXTS = [
    "The keeper of the red lighthouse logged ships in 1924.",
    "The secret code for the blue lighthouse is 4821-ALPHA.",
    "A blue door opens with a key kept by the archivist.",
    "Nothing here but cooking: saffron, broth and pastry.",
    "",
]


def test_lexical_index_scores_equal_bm25s_on_the_same_terms() -> None:
    generator = ProseGenerator(5)
    texts = [" ".join(generator.paragraph() for _ in range(4)) for _ in range(60)]
    index = LexicalIndex.build(texts)
    reference = bm25s.BM25(method="lucene")
    reference.index([[term.decode() for term in terms(text)] for text in texts], show_progress=False)
    for question in (
        "Who repaired the telescope near Lisbon?",
        "saffron broth 1901",
        "the lighthouse keeper",
    ):
        query = [term.decode() for term in dict.fromkeys(terms(question))]
        known = [term for term in query if term in reference.vocab_dict]
        expected = reference.get_scores(known)
        assert np.allclose(index.scores(question), expected, rtol=1e-5, atol=1e-6)


def test_lexical_index_ranks_the_text_holding_every_term_first() -> None:
    index = LexicalIndex.build(TEXTS)
    scores = index.scores("What is the secret code for the blue lighthouse?")
    assert scores.shape == (5,)
    assert order_by_score(scores).tolist()[:3] == [1, 0, 2]
    assert scores[3] == 0 and scores[4] == 0


@pytest.mark.parametrize("question", ["", "the of and", "zzz unknown words"])
def test_lexical_index_scores_zero_for_questions_without_known_terms(question: str) -> None:
    index = LexicalIndex.build(TEXTS)
    assert not index.scores(question).any()


def test_lexical_index_of_texts_without_terms_scores_zero() -> None:
    index = LexicalIndex.build(["", "...", "the and of"])
    assert index.size == 3
    assert not index.scores("anything at all").any()


def test_order_by_score_drops_zeros_and_keeps_document_order_on_ties() -> None:
    scores = np.array([0.0, 2.0, 1.0, 2.0, 0.0, 1.0], dtype=np.float32)
    assert order_by_score(scores).tolist() == [1, 3, 2, 5]


def test_fuse_adds_reciprocal_ranks() -> None:
    lexical = np.array([2, 0, 1], dtype=np.int64)
    dense = np.array([0, 3, 2, 1], dtype=np.int64)
    fused = fuse([lexical, dense], size=5, k=60)
    # 0: 1/62 + 1/61; 2: 1/61 + 1/63; 1: 1/63 + 1/64; 3: 1/62; 4: absent
    assert fused.tolist() == [0, 2, 1, 3]


def test_fuse_with_a_large_k_favours_agreement_over_a_single_first_place() -> None:
    first_once = np.array([7, 1, 2], dtype=np.int64)
    second_twice = np.array([1, 2, 7], dtype=np.int64)
    assert fuse([first_once, second_twice], size=8, k=60).tolist()[0] == 1


def test_complete_appends_missing_items_in_document_order() -> None:
    assert complete(np.array([3, 1], dtype=np.int64), 5).tolist() == [3, 1, 0, 2, 4]
    assert complete(np.array([], dtype=np.int64), 3).tolist() == [0, 1, 2]


def test_cosine_scores_measure_direction_only() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [0.0, 0.0]], dtype=np.float32)
    scores = cosine_scores(vectors, [2.0, 0.0])
    assert np.allclose(scores, [1.0, 0.0, np.sqrt(0.5), 0.0], atol=1e-6)


def _document(texts: list[str]) -> tuple[bytes, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The texts one after another as folded UTF-8, with each text's place in it."""
    lengths = np.array([len(text.encode()) for text in texts], dtype=np.int64)
    ends = np.cumsum(lengths)
    return "".join(texts).encode().lower(), ends - lengths, ends


def test_phrase_scores_lift_the_text_holding_the_question_as_a_phrase() -> None:
    texts = [
        "The secret of a good lighthouse is patience, not a code. The blue door was blue. Secret code! ",
        "The Secret Code for the BLUE lighthouse is 4821-ALPHA. ",
        "Blue paint, a lighthouse far away; the secret is kept; the code is long; blue again. ",
        "Saffron and broth. ",
    ]
    index = LexicalIndex.build(texts)
    question = "What is the secret code for the blue lighthouse?"
    plain = index.scores(question)
    folded, starts, ends = _document(texts)
    boosted = phrase_scores(plain, question, index, folded=folded, starts=starts, ends=ends)
    assert order_by_score(plain).tolist()[0] != 1
    assert order_by_score(boosted).tolist()[0] == 1
    bonus = boosted - plain
    pairs = [("secret", "code"), ("code", "blue"), ("blue", "lighthouse")]
    expected = sum((index.idf(a.encode()) + index.idf(b.encode())) / 2 for a, b in pairs)
    assert bonus[1] == pytest.approx(expected, rel=1e-5)
    assert bonus[0] == pytest.approx((index.idf(b"secret") + index.idf(b"code")) / 2, rel=1e-5)
    assert bonus[2] == 0 and bonus[3] == 0


def test_phrase_scores_count_overlaps_and_not_cut_phrases() -> None:
    folded = b"aaa alpha beta bbb alpha beta ccc"
    index = LexicalIndex.build(["alpha beta", "alpha", "gamma"])
    plain = np.zeros(3, dtype=np.float32)
    # chunk 0 holds the first phrase, chunk 1 overlaps it and holds the second, chunk 2 cuts the second
    starts = np.array([0, 4, 20], dtype=np.int64)
    ends = np.array([15, 29, 33], dtype=np.int64)
    boosted = phrase_scores(plain, "alpha beta", index, folded=folded, starts=starts, ends=ends)
    weight = (index.idf(b"alpha") + index.idf(b"beta")) / 2
    assert boosted.tolist() == pytest.approx([weight, weight, 0.0])


def test_phrase_scores_find_phrases_in_non_ascii_text() -> None:
    texts = [
        "\u00c9cole normale, rue d'Ulm. ",
        "Une \u00e9cole normale. ",
        "Caf\u00e9 \u00e9cole. ",
        "Rien. ",
    ]
    index = LexicalIndex.build(texts)
    folded, starts, ends = _document(texts)
    question = "O\u00f9 est l'\u00c9cole Normale ?"
    boosted = phrase_scores(
        np.zeros(4, dtype=np.float32), question, index, folded=folded, starts=starts, ends=ends
    )
    assert boosted[0] > 0 and boosted[1] > 0
    assert boosted[2] == 0 and boosted[3] == 0


def test_phrase_scores_change_nothing_without_a_phrase_in_the_question() -> None:
    index = LexicalIndex.build(TEXTS)
    folded, starts, ends = _document(TEXTS)
    for question in ("lighthouse", "unknown words here", "zebra lighthouse"):
        plain = index.scores(question)
        boosted = phrase_scores(plain, question, index, folded=folded, starts=starts, ends=ends)
        assert np.array_equal(boosted, plain)


def test_phrase_occurrences_are_bounded() -> None:
    text = b"alpha beta " * (PHRASE_OCCURRENCES + 50)
    assert len(_occurrences(text, b"alpha beta")) == PHRASE_OCCURRENCES
    assert _occurrences(b"xx yy xx", b"xx") == [0, 6]


def test_idf_of_unknown_terms_is_zero() -> None:
    index = LexicalIndex.build(TEXTS)
    assert index.idf(b"nowhere") == 0.0
    assert index.idf(b"lighthouse") < index.idf(b"saffron")
