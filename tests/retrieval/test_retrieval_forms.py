"""POST /retrieve speaks both request forms: Search-R1's batch `{"queries": [...]}` and the
single `{"query": "..."}` that the paper's search tool (SkyRL's `call_search_api`) posts; each
is answered in the shape its client reads (`result` holds one list of documents per query, so
the single form's documents are `result[0]`)."""

import httpx
import pytest


def test_single_query_form_is_answered_as_the_papers_search_tool_reads_it(service, searcher):
    url = service.url + "/retrieve"
    answer = httpx.post(url, json={"query": "guild lore", "topk": 3, "return_scores": True}, timeout=10)
    assert answer.status_code == 200
    body = answer.json()
    want = searcher.search("guild lore", k=3)
    assert body["result"] == [[{"document": {"id": h.docid, "contents": h.contents}, "score": h.score}
                               for h in want]]
    assert body["errors"] == []
    # what the paper's tool does with it: result[i][j]["document"]["contents"] per query i
    titles = [doc["document"]["contents"].split("\n")[0] for doc in body["result"][0]]
    assert titles == [h.contents.split("\n")[0] for h in want]


def test_single_and_batch_forms_find_the_same_documents(service):
    url = service.url + "/retrieve"
    single = httpx.post(url, json={"query": "river", "topk": 2}, timeout=10).json()
    batch = httpx.post(url, json={"queries": ["river"], "topk": 2}, timeout=10).json()
    assert single == batch
    assert len(single["result"]) == 1 and len(single["result"][0]) == 2
    assert set(single["result"][0][0]) == {"id", "contents"}        # no scores unless asked


@pytest.mark.parametrize("request_body, message", [
    ({"topk": 3}, "give either 'queries' (a list of strings) or 'query' (one string)"),
    ({"query": "a", "queries": ["b"]}, "not both or neither"),
    ({"query": ["a", "b"]}, "'query': Input should be a valid string"),
    ({"query": 3}, "'query': Input should be a valid string"),
])
def test_a_request_in_neither_or_both_forms_is_one_line_400(service, request_body, message):
    answer = httpx.post(service.url + "/retrieve", json=request_body, timeout=10)
    assert answer.status_code == 400
    assert message in answer.json()["error"] and "\n" not in answer.json()["error"]
