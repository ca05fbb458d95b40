//! How every connection is made: its settings are set once it is connected, so that a pooler that
//! refuses startup parameters (PgBouncer) lets it through.

use std::time::Duration;

use mostrador_queue::db::{self, DbConfig};
use sqlx::PgPool;

async fn settings(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "select concat_ws(' ', current_setting('statement_timeout'), current_setting('plan_cache_mode'), \
         current_setting('jit'), current_setting('enable_sort'), current_setting('enable_seqscan'))",
    )
    .fetch_all(pool)
    .await
    .expect("settings")
}

#[sqlx::test(migrations = false)]
async fn every_connection_has_its_settings_and_sends_none_at_start(pool: PgPool) {
    let options = pool.connect_options();
    let url = format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().expect("a database"),
    );
    let mut config = DbConfig::new(url, "mostrador-test");
    config.statement_timeout = Duration::from_millis(7_500);
    let pool = config.connect_lazy().expect("pool");
    assert_eq!(
        pool.connect_options().get_options(),
        None,
        "no `options` in the startup packet: PgBouncer refuses the connection"
    );
    assert_eq!(
        settings(&pool).await,
        ["7500ms force_generic_plan off on on"]
    );
    // The claim's and the publisher's connections: the pool's settings, and their own.
    assert_eq!(
        settings(&db::claimer(&pool)).await,
        ["7500ms force_generic_plan off off off"]
    );
    assert_eq!(
        settings(&db::publisher(&pool)).await,
        ["7500ms force_generic_plan off on off"]
    );
}
