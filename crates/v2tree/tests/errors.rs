//! The v2 error: messages, HTTP statuses and JSON.

use actcd_v2tree::V2Error;

#[test]
fn want_messages_and_statuses() {
    // (code, message, status) as etcd 3.4's v2error has them.
    let cases: &[(u32, &str, u16)] = &[
        (100, "Key not found", 404),
        (101, "Compare failed", 412),
        (102, "Not a file", 403),
        (103, "Reached the max number of peers in the cluster", 400),
        (104, "Not a directory", 400),
        (105, "Key already exists", 412),
        (106, "The prefix of given key is a keyword in etcd", 400),
        (107, "Root is read only", 400),
        (108, "Directory not empty", 403),
        (109, "Peer address has existed", 400),
        (110, "The request requires user authentication", 401),
        (200, "Value is Required in POST form", 400),
        (201, "PrevValue is Required in POST form", 400),
        (202, "The given TTL in POST form is not a number", 400),
        (203, "The given index in POST form is not a number", 400),
        (204, "Value or TTL is required in POST form", 400),
        (205, "The given timeout in POST form is not a number", 400),
        (206, "Name is required in POST form", 400),
        (207, "Index or value is required", 400),
        (208, "Index and value cannot both be specified", 400),
        (209, "Invalid field", 400),
        (210, "Invalid POST form", 400),
        (211, "Value provided on refresh", 400),
        (212, "A TTL must be provided on refresh", 400),
        (213, "", 400),
        (300, "Raft Internal Error", 500),
        (301, "During Leader Election", 500),
        (400, "watcher is cleared due to etcd recovery", 400),
        (
            401,
            "The event in requested index is outdated and cleared",
            400,
        ),
        (402, "Standby Internal Error", 400),
        (403, "Invalid active size", 400),
        (404, "Standby remove delay", 400),
        (500, "Client Internal Error", 400),
    ];
    for (code, message, status) in cases {
        let e = V2Error::new(*code, "c", 1);
        assert_eq!(e.message(), *message, "code {code}");
        assert_eq!(e.http_status(), *status, "code {code}");
    }
}

#[test]
fn want_json_bodies() {
    let cases: &[(V2Error, &str)] = &[
        (
            V2Error::new(100, "/foo", 5),
            r#"{"errorCode":100,"message":"Key not found","cause":"/foo","index":5}"#,
        ),
        // An empty cause is left out (etcd 3.4.23: DELETE /v2/keys/?prevValue=x).
        (
            V2Error::new(102, "", 8),
            r#"{"errorCode":102,"message":"Not a file","index":8}"#,
        ),
        (
            V2Error::request(209, "invalid value for \"recursive\""),
            r#"{"errorCode":209,"message":"Invalid field","cause":"invalid value for \"recursive\"","index":0}"#,
        ),
        (
            V2Error::new(110, "Insufficient credentials", 0),
            r#"{"errorCode":110,"message":"The request requires user authentication","cause":"Insufficient credentials","index":0}"#,
        ),
        (
            V2Error::new(101, "[<a> != b&c]", 3),
            r#"{"errorCode":101,"message":"Compare failed","cause":"[\u003ca\u003e != b\u0026c]","index":3}"#,
        ),
    ];
    for (e, want) in cases {
        assert_eq!(e.to_json(), *want);
    }
    assert_eq!(
        V2Error::new(100, "/foo", 5).to_string(),
        "Key not found (/foo)"
    );
}
