//! `mostrador api-key` against a real api process: `create` prints a key that works, `list` shows
//! it without the key, `revoke` makes it fail.

use std::process::Output;

use sqlx::PgPool;

use crate::support::{Db, Worker};

/// `mostrador-e2e api-key <args> --database-url <the test's>`.
fn api_key(db: &Db, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .arg("api-key")
        .args(args)
        .args(["--database-url", &db.url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("mostrador api-key runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn created_key_works_list_hides_it_and_revoke_makes_it_fail(pool: PgPool) {
    let db = Db::new(pool).await;
    let created = stdout(&api_key(
        &db,
        &[
            "create", "--sub", "ana", "--role", "customer", "--store", "madrid-1",
        ],
    ));
    let key = created.trim().to_owned();
    assert!(key.starts_with("mostrador_"), "{created:?}");
    assert_eq!(created.lines().count(), 1, "only the key: {created:?}");
    let expiring = stdout(&api_key(
        &db,
        &[
            "create",
            "--sub",
            "marta",
            "--role",
            "manager",
            "--store",
            "madrid-1",
            "--expires",
            "90d",
        ],
    ));

    let mut api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    api.until_ready_is(200).await;
    let search = async |headers: &[(&str, &str)]| {
        let mut headers = headers.to_vec();
        headers.push(("Content-Type", "application/json"));
        api.request("POST", "/threads", &headers, "{}")
            .await
            .expect("the api answers")
    };
    let (status, body) = search(&[("x-api-key", &key)]).await;
    assert_eq!(status, 200, "x-api-key: {body}");
    let bearer = format!("Bearer {key}");
    let (status, body) = search(&[("Authorization", &bearer)]).await;
    assert_eq!(status, 200, "bearer: {body}");

    let listed = stdout(&api_key(&db, &["list"]));
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two keys: {listed}");
    assert!(lines[0].starts_with("KEY ID"), "{listed}");
    assert!(!listed.contains(&key), "{listed}");
    assert!(!listed.contains(expiring.trim()), "{listed}");
    let ana = lines
        .iter()
        .find(|line| line.contains(" ana "))
        .expect("ana's key is listed");
    assert!(ana.contains(&key[..18]), "its prefix: {ana}");
    assert!(
        ana.contains("customer") && ana.contains("madrid-1"),
        "{ana}"
    );
    assert!(ana.contains("never") && ana.ends_with("active"), "{ana}");
    let key_id = ana.split_whitespace().next().expect("the id");

    let revoked = stdout(&api_key(&db, &["revoke", key_id]));
    assert!(revoked.contains(key_id), "{revoked}");
    let (status, body) = search(&[("x-api-key", &key)]).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = search(&[("Authorization", &bearer)]).await;
    assert_eq!(status, 401);
    let (status, _) = search(&[("x-api-key", expiring.trim())]).await;
    assert_eq!(status, 200, "the other key still works");
    let listed = stdout(&api_key(&db, &["list"]));
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with(key_id) && line.ends_with("revoked")),
        "{listed}"
    );

    let unknown = api_key(&db, &["revoke", "0190a0a0-0000-7000-8000-000000000000"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("not found"),
        "{unknown:?}"
    );
    let refused = api_key(&db, &["create", "--sub", "ana", "--role", ""]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("may not be empty"),
        "{refused:?}"
    );

    api.terminate();
    assert!(
        api.exit(std::time::Duration::from_secs(10)).await.success(),
        "{}",
        api.log()
    );
}
