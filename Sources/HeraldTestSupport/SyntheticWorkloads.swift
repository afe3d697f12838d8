// The per-user request lists of the storm, restart and replay benchmarks (fed to SyntheticHistory, or sent over TCP in tests).
import HeraldCore

/// Requests as a settings service and producers would send them, one user at a time.
public enum SyntheticWorkloads {
    public static let app = "com.example.news"
    /// Zones whose 08:00 is the same instant in November (all UTC+0 then): a storm across zones.
    public static let stormZones = ["Europe/London", "Europe/Lisbon", "Atlantic/Reykjavik", "Africa/Abidjan", "UTC"]

    public static func registerApp() -> (op: String, body: JSONValue) {
        ("registerApp", .object(["app": .string(app), "entitlements": .array([])]))
    }

    static func authorize(_ user: String) -> (op: String, body: JSONValue) {
        ("authorization", .object(["user": .string(user), "app": .string(app), "status": "authorized",
                                   "options": .array(["alert", "sound", "badge"])]))
    }

    static func submit(_ user: String, id: String, title: String, extra: [String: JSONValue] = [:]) -> (op: String, body: JSONValue) {
        var o: [String: JSONValue] = [
            "id": .string(id), "app": .string(app), "user": .string(user), "title": .string(title),
            "body": .string("Three stories picked for you this morning, with the weather and your commute. Open to read."),
            "hiddenPreviewsBodyPlaceholder": "News update", "threadId": "morning", "interruptionLevel": "active",
        ]
        for (k, v) in extra { o[k] = v }
        return ("submit", .object(o))
    }

    /// 08:00 storm: authorized, the app set to summary delivery, a summary at 08:00 in one of
    /// `stormZones`, and `items` notifications queued for it (relevance varies, so ordering works).
    public static func stormUser(_ u: Int, items: Int) -> [(op: String, body: JSONValue)] {
        let user = "user-\(u)"
        var requests = [
            authorize(user),
            ("settings", .object(["user": .string(user), "app": .string(app), "delivery": "summary"])),
            ("summarySchedule", .object(["user": .string(user), "times": .array(["08:00"]),
                                         "timeZone": .string(stormZones[u % stormZones.count])])),
        ]
        for k in 0..<items {
            requests.append(submit(user, id: "storm-\(u)-\(k)", title: "Story \(k + 1)",
                                   extra: ["relevanceScore": .double(Double((u + k) % 10) / 10)]))
        }
        return requests
    }

    /// Restart: authorized, and `timers` deferred notifications due over the next `spreadHours`
    /// after `from` (pending decisions the wheel must know again after a restart).
    public static func timersUser(_ u: Int, timers: Int, from: Instant, spreadHours: Int64 = 48) -> [(op: String, body: JSONValue)] {
        let user = "user-\(u)"
        var requests = [authorize(user)]
        for k in 0..<timers {
            let offset = Int64((u &* 7919 &+ k &* 104_729) % Int(spreadHours * 3600)) + 60
            let due = from.adding(.seconds(offset))
            requests.append(submit(user, id: "later-\(u)-\(k)", title: "Reminder \(k + 1)",
                                   extra: ["deliverAt": .string(due.rfc3339)]))
        }
        return requests
    }

    /// Replay: a realistic mix for a log of roughly `eventsPerUser` events per user — settings,
    /// immediate alerts, some users on summary delivery, some with a Focus on, a deferred one,
    /// opened and withdrawn notifications.
    public static func mixedUser(_ u: Int, eventsPerUser: Int) -> [(op: String, body: JSONValue)] {
        let user = "user-\(u)"
        var requests = [authorize(user)]
        if u % 5 == 0 { requests.append(("settings", .object(["user": .string(user), "app": .string(app), "delivery": "summary"]))) }
        if u % 7 == 0 { requests.append(("settings", .object(["user": .string(user), "showPreviews": "never"]))) }
        if u % 11 == 0 {
            requests.append(("focusDefine", .object(["user": .string(user), "focus": "Work", "allowedApps": .array([]),
                                                     "allowTimeSensitive": true])))
            requests.append(("focusOn", .object(["user": .string(user), "focus": "Work"])))
        }
        var k = 0
        while requests.count < eventsPerUser {
            let id = "mix-\(u)-\(k)"
            switch k % 10 {
            case 3: requests.append(submit(user, id: id, title: "Reply from Ana", extra: ["interruptionLevel": "timeSensitive"]))
            case 5: requests.append(("opened", .object(["user": .string(user), "app": .string(app), "id": .string("mix-\(u)-\(k - 1)")])))
            case 7: requests.append(("withdraw", .object(["user": .string(user), "app": .string(app), "id": .string("mix-\(u)-\(k - 1)")])))
            case 9: requests.append(submit(user, id: id, title: "Weekly digest", extra: ["interruptionLevel": "passive"]))
            default: requests.append(submit(user, id: id, title: "Story \(k + 1)"))
            }
            k += 1
        }
        return requests
    }
}
