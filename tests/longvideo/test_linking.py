"""Entity linking on synthetic tubes with known identities."""
from core.box_ops import numpy_box_iou_pairwise as box_iou

import itertools

import numpy as np
import pytest

from longvideo.linking import ClipTubes, LinkingWeights, box_continuity, link_by_names, link_clips, pair_scores

STEP = 6  # 30 fps on the 5-fps grid


def clip(start, phrases, boxes_of, text=None, appearance=None, n=5, present=None):
    """A clip of ``n`` grid frames from source frame ``start``; ``boxes_of[p]`` is the xyxy box of phrase p
    (constant, or a function of the frame)."""
    frames = start + STEP * np.arange(n)
    boxes = np.array([[b(f) if callable(b) else b for f in frames] for b in boxes_of], dtype=float)
    mask = np.ones((len(phrases), n), bool) if present is None else np.asarray(present)
    return ClipTubes(frames, phrases, boxes, mask, text=text, appearance=appearance)


def unit(*v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


KNIFE, CUP, BALL = unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0)


def test_box_iou_hand_computed():
    a = np.array([0, 0, 10, 10.0])
    b = np.array([5, 0, 15, 10.0])
    assert box_iou(a, b) == pytest.approx(50 / 150)
    assert box_iou(a, np.array([20, 20, 30, 30.0])) == 0.0


def test_same_object_across_touching_clips_is_one_entity():
    moving = lambda f: [f, 10, f + 40, 50]  # noqa: E731  (drifts 6 px per grid frame)
    clips = [clip(0, ["a red ball"], [moving], text=BALL[None]),
             clip(30, ["the ball"], [moving], text=unit(0.2, 0, 1, 0)[None])]
    ids, entities = link_clips(clips)
    assert ids == [[0], [0]]
    assert len(entities) == 1
    assert entities[0].name == "a red ball"  # the phrase with the most words
    assert sorted(entities[0].tube) == list(range(0, 60, STEP))  # one tube over both clips


def test_two_look_alike_objects_are_kept_apart_by_their_boxes():
    left, right = [0, 0, 40, 40], [200, 0, 240, 40]
    same = np.stack([KNIFE, KNIFE])
    clips = [clip(0, ["a knife", "a knife"], [left, right], text=same, appearance=same),
             clip(30, ["a knife", "a knife"], [right, left], text=same, appearance=same),
             clip(60, ["a knife"], [[202, 0, 242, 40]], text=KNIFE[None], appearance=KNIFE[None])]
    ids, entities = link_clips(clips)
    assert ids[0] == [0, 1]
    assert ids[1] == [1, 0]  # listed in the other order, still matched by position
    assert ids[2] == [1]
    assert len(entities) == 2


def test_object_leaving_and_returning_keeps_its_id_and_a_new_object_gets_a_new_one():
    clips = [clip(0, ["a ball"], [[0, 0, 30, 30]], text=BALL[None], appearance=unit(1, 1, 0)[None]),
             clip(30, ["a cup"], [[100, 100, 140, 140]], text=CUP[None], appearance=unit(0, 0, 1)[None]),
             clip(60, ["a cup"], [[101, 100, 141, 140]], text=CUP[None], appearance=unit(0, 0.1, 1)[None]),
             # back after 60 frames, elsewhere: no box cue, linked by meaning and appearance
             clip(120, ["the ball"], [[300, 50, 330, 80]], text=unit(0, 0.1, 1, 0)[None],
                  appearance=unit(1, 0.9, 0)[None])]
    ids, entities = link_clips(clips)
    assert ids == [[0], [1], [1], [0]]
    assert [e.mentions for e in entities] == [[(0, "a ball"), (3, "the ball")], [(1, "a cup"), (2, "a cup")]]


def test_a_similar_object_appearing_elsewhere_next_to_the_last_box_is_new():
    # same words, but its first box is on the grid frame right after the other's last, far away
    clips = [clip(0, ["a knife"], [[0, 0, 40, 40]], text=KNIFE[None], appearance=KNIFE[None]),
             clip(30, ["a knife"], [[300, 0, 340, 40]], text=KNIFE[None], appearance=KNIFE[None])]
    no_veto = LinkingWeights(box=2.0, min_box_iou=None, min_score=0.45)
    scores = pair_scores(link_clips(clips[:1])[1], clips[1], no_veto)
    assert scores[0, 0] == pytest.approx((2 * 0.0 + 1.0 + 1.0) / 4)  # the weighted mean, IoU 0
    assert link_clips(clips, no_veto)[0] == [[0], [0]]
    assert link_clips(clips)[0] == [[0], [1]]  # boxes that do not touch on adjacent frames veto the link


def test_overlapping_clips_use_the_mean_iou_on_shared_frames():
    first = clip(0, ["a cup"], [[0, 0, 10, 10]], n=6)  # frames 0..30
    second = clip(18, ["a cup"], [lambda f: [0, 0, 10, 10] if f <= 30 else [5, 0, 15, 10]], n=6)  # 18..48
    _, entities = link_clips([first])
    cue = box_continuity(entities, second, adjacent_frames=STEP)
    assert cue[0, 0] == pytest.approx(1.0)  # frames 18, 24, 30 shared, IoU 1 each
    shifted = clip(18, ["a cup"], [[5, 0, 15, 10]], n=6)
    assert box_continuity(entities, shifted, adjacent_frames=STEP)[0, 0] == pytest.approx(50 / 150)


def test_missing_cues_are_left_out_not_counted_as_zero():
    a = clip(0, ["x"], [[0, 0, 10, 10]], text=KNIFE[None])
    far = clip(600, ["y"], [[0, 0, 10, 10]], text=unit(1, 1, 0, 0)[None])
    _, entities = link_clips([a])
    scores = pair_scores(entities, far, LinkingWeights())
    assert scores[0, 0] == pytest.approx(np.sqrt(0.5))  # text only: cos 45 degrees
    bare = clip(600, ["y"], [[0, 0, 10, 10]])
    assert np.isnan(pair_scores(entities, bare, LinkingWeights())[0, 0])
    assert link_clips([a, bare])[0] == [[0], [1]]  # no cue at all: a new entity


def test_linking_matches_a_brute_force_assignment_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(20):
        P = int(rng.integers(1, 5))
        first = clip(0, [f"p{i}" for i in range(P)], rng.uniform(0, 100, (P, 4)).cumsum(-1).tolist(),
                     text=rng.normal(size=(P, 8)))
        Q = int(rng.integers(1, 5))
        second = clip(30, [f"q{i}" for i in range(Q)], rng.uniform(0, 100, (Q, 4)).cumsum(-1).tolist(),
                      text=rng.normal(size=(Q, 8)))
        weights = LinkingWeights(min_score=-1.0, min_box_iou=None)
        _, entities = link_clips([first], weights)
        scores = pair_scores(entities, second, weights)
        ids, _ = link_clips([first, second], weights)
        # best total over every one-to-one assignment, by enumeration
        if Q <= P:
            best = max(sum(scores[q, e] for q, e in enumerate(es)) for es in itertools.permutations(range(P), Q))
        else:
            best = max(sum(scores[q, e] for e, q in enumerate(qs)) for qs in itertools.permutations(range(Q), P))
        got = sum(scores[q, e] for q, e in enumerate(ids[1]) if e < P)
        assert got == pytest.approx(best)


def test_link_by_names_groups_phrases_given_the_same_video_level_name():
    ids = link_by_names([["a knife", "a board"], ["the knife", "a cup"]],
                        [["knife", "board"], ["knife", None]])
    assert ids == [[0, 1], [0, 2]]


def test_box_continuity_counts_in_full_from_full_box_iou():
    first = clip(0, ["x"], [[0, 0, 10, 10]])
    touching = clip(30, ["x"], [[5, 0, 15, 10]])  # IoU 1/3 with the last box, one grid step later
    _, entities = link_clips([first])
    half = LinkingWeights(box=1.0, full_box_iou=0.5)
    assert pair_scores(entities, touching, half)[0, 0] == pytest.approx((1 / 3) / 0.5)
    assert pair_scores(entities, touching, LinkingWeights(box=1.0, full_box_iou=0.25))[0, 0] == pytest.approx(1.0)
