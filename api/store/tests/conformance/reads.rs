//! What a write appends reads back whole, in position and stream order.

use super::*;

#[tokio::test]
async fn an_empty_log_has_head_zero_and_nothing_to_read() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        assert_eq!(
            s.head().await.unwrap(),
            Head {
                position: 0,
                hash: [0; 32]
            },
            "{b}"
        );
        assert!(s.read_after(0, 10).await.unwrap().is_empty(), "{b}");
        assert!(s.read_for_replay(0, 10).await.unwrap().is_empty(), "{b}");
        assert!(s.read_stream("member/n-1").await.unwrap().is_empty(), "{b}");
        assert_eq!(s.cluster_row().await.unwrap(), (0, 0), "{b}");
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::default(),
            "{b}"
        );
        assert_eq!(export_chunk(&*s, 0, 0).await.unwrap(), None, "{b}");
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 0,
                hash: [0; 32]
            },
            "{b}"
        );
        s.ping().await.unwrap();
        let (open, idle) = s.pool_stats().expect("both backends pool their reads");
        assert!(idle <= open, "{b}");
    }
}

#[tokio::test]
async fn appended_events_read_back_whole_in_position_and_stream_order() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        let a1 = append(&*s, "member/n-1", 1, 3).await;
        let b1 = append(&*s, "member/n-2", 4, 2).await;
        let a2 = append(&*s, "member/n-1", 6, 2).await;
        let all: Vec<Recorded> = [a1, b1, a2].concat();
        let last = all.last().unwrap();
        assert_eq!(
            s.head().await.unwrap(),
            Head {
                position: 7,
                hash: last.hash
            },
            "{b}"
        );
        // The log, whole and in chunks.
        assert_eq!(s.read_after(0, 100).await.unwrap(), all, "{b}");
        assert_eq!(s.read_after(2, 3).await.unwrap(), all[2..5], "{b}");
        assert!(s.read_after(7, 100).await.unwrap().is_empty(), "{b}");
        // What a fold reads is the same event.
        let replay = s.read_for_replay(1, 100).await.unwrap();
        assert_eq!(replay.len(), 6, "{b}");
        for (r, e) in replay.iter().zip(&all[1..]) {
            assert_eq!(
                (
                    r.position,
                    r.stream_id,
                    r.stream_version,
                    r.event_type,
                    r.schema_version,
                    r.occurred_at,
                    r.principal,
                    r.payload
                ),
                (
                    e.position,
                    e.stream_id.as_str(),
                    e.stream_version,
                    e.event_type.as_str(),
                    e.schema_version,
                    e.occurred_at,
                    e.meta.principal.as_str(),
                    &e.payload[..]
                ),
                "{b}"
            );
        }
        assert_eq!(s.read_for_replay(0, 2).await.unwrap().len(), 2, "{b}");
        // A stream, whole and by pages of its versions.
        let n1 = s.read_stream("member/n-1").await.unwrap();
        assert_eq!(
            n1.iter().map(|e| e.stream_version).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5],
            "{b}"
        );
        assert_eq!(
            n1.iter().map(|e| e.position).collect::<Vec<_>>(),
            [1, 2, 3, 6, 7],
            "{b}"
        );
        assert_eq!(
            s.read_stream_page("member/n-1", 2, 2).await.unwrap(),
            n1[2..4],
            "{b}"
        );
        assert!(s
            .read_stream_page("member/n-1", 5, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(s.read_stream("member/none").await.unwrap().is_empty());
        // Exports and verification read the same log.
        let (lines, at) = export_chunk(&*s, 0, 5).await.unwrap().unwrap();
        assert_eq!(at, 5, "{b}");
        assert_eq!(lines.iter().filter(|&&c| c == b'\n').count(), 5, "{b}");
        assert_eq!(export_chunk(&*s, 5, 5).await.unwrap(), None, "{b}");
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 7,
                hash: last.hash
            },
            "{b}"
        );
    }
}
