//! `mostrador token`: the development tokens the api accepts.

use mostrador_api::{AuthConfig, Authenticator, Caller, ClaimPaths, Role};

#[tokio::test]
async fn minted_development_token_verifies_with_the_same_settings() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args([
            "token", "--sub", "marta", "--role", "manager", "--store", "madrid-1",
        ])
        .args(["--role-claim", "realm_access.roles"])
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
            role: "realm_access.roles".into(),
            ..ClaimPaths::default()
        },
    };
    assert_eq!(
        Authenticator::new(&config)
            .expect("config")
            .verify(token.trim())
            .await,
        Ok(Caller {
            subject: "marta".into(),
            role: Role::Manager,
            store: Some("madrid-1".into()),
        })
    );

    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(["token", "--sub", "marta", "--role", "owner"])
        .env("MOSTRADOR_JWT_SECRET", "e2e secret")
        .output()
        .expect("mostrador token runs");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a role"));
}
