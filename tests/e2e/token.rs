//! `mostrador token`: the development tokens the api accepts, with the claims where the policy
//! says.

use mostrador_api::{AuthConfig, Authenticator, Caller, ClaimPaths};

#[tokio::test]
async fn minted_development_token_verifies_with_the_same_settings() {
    let dir = std::env::temp_dir().join(format!("mostrador-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[caller]\ntenant = \"attributes.store\"\nroles = \"realm_access.roles\"\n",
    )
    .expect("the policy");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args([
            "token", "--sub", "marta", "--role", "manager", "--role", "auditor", "--store",
            "madrid-1",
        ])
        .arg("--policy")
        .arg(&policy)
        .env("MOSTRADOR_JWT_SECRET", "e2e secret")
        .output()
        .expect("mostrador token runs");
    assert!(output.status.success(), "{output:?}");
    let token = String::from_utf8(output.stdout).expect("utf-8");
    let config = AuthConfig {
        secret: "e2e secret".into(),
        jwks_url: None,
        issuer: "mostrador".into(),
        audience: "mostrador".into(),
        claims: ClaimPaths {
            subject: "sub".into(),
            tenant: "attributes.store".into(),
            roles: "realm_access.roles".into(),
        },
    };
    assert_eq!(
        Authenticator::new(&config)
            .expect("config")
            .verify(token.trim())
            .await,
        Ok(Caller::new("marta")
            .with_roles(["manager", "auditor"])
            .in_tenant(Some("madrid-1")))
    );

    std::fs::write(&policy, "[graphs.tienda]\nstrat = [\"*\"]\n").expect("the policy");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(["token", "--sub", "marta", "--policy"])
        .arg(&policy)
        .env("MOSTRADOR_JWT_SECRET", "e2e secret")
        .output()
        .expect("mostrador token runs");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("strat") && stderr.contains("policy.toml"),
        "a mistake in the policy is named: {stderr}"
    );
    std::fs::remove_dir_all(&dir).expect("cleaned up");
}
